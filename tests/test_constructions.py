"""The exact constructions, checked on every input they claim."""

import math

import pytest
import torch

from kernelgap.errors import KernelgapError
from kernelgap.models.constructions import build_construction, softmax_beta
from kernelgap.models.verify import check_exhaustive, verify_constructions

CPU = torch.device("cpu")


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_rank1_exact_up_to_two_tokens_with_zero_error(m):
    for n in (1, 2):
        res = check_exhaustive(build_construction("rank1", m, n), m, n, CPU)
        assert res["max_error"] == 0.0 and res["sequences"] == 2 ** (n * m)


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_rank1_fails_at_three_tokens(m):
    res = check_exhaustive(build_construction("rank1", m, 3), m, 3, CPU)
    assert not res["exact"]


def test_rank1_worst_case_is_zeros_then_ones():
    model = build_construction("rank1", 6, 3)
    x = torch.tensor([[[0.0] * 6, [0.0] * 6, [1.0] * 6]], dtype=torch.float64)
    assert model(x)[0, 0, 2].item() == pytest.approx(-2.0)  # target 0: error 2


@pytest.mark.parametrize("name", ["softmax", "positive_2m"])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_softmax_and_positive_constructions_exact_on_triples(name, m):
    res = check_exhaustive(build_construction(name, m, 3), m, 3, CPU)
    assert res["exact"]
    assert res["max_error"] <= 2 * math.exp(-softmax_beta(3)) + 1e-12  # (N−1)e^{−β}


def test_positive_construction_reproduces_softmax_weights():
    a = build_construction("softmax", 4, 3)
    b = build_construction("positive_2m", 4, 3)
    x = torch.randint(0, 2, (64, 3, 4)).double()
    assert torch.allclose(a(x), b(x), atol=1e-10)
    assert b.scorer.features == 16


def test_verify_table_m6_matches_spec_calibration():
    out = verify_constructions(6)
    by = {(c["construction"], c["N"]): c for c in out["checks"]}
    assert by[("rank1", 1)]["max_error"] == by[("rank1", 2)]["max_error"] == 0.0
    assert by[("rank1", 3)]["max_error"] == pytest.approx(2.0)
    assert by[("softmax", 3)]["sequences"] == 262_144
    assert by[("softmax", 3)]["max_error"] == pytest.approx(0.155362, abs=1e-6)
    assert by[("positive_2m", 3)]["exact"]


@pytest.mark.parametrize("m", [0, -1, 10])
def test_verify_rejects_bad_m(m):
    with pytest.raises(KernelgapError):
        verify_constructions(m)


def test_cuda_request_without_cuda_is_user_error():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(KernelgapError, match="CUDA is not available"):
        verify_constructions(2, device="cuda")
