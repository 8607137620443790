"""`kernelgap verify --length N`: every construction on every sequence of length N, each outcome
compared with the theory's (rank 1 fails from N = 3, softmax and the positive 2^m construction
are exact with the β of their own N)."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import kernelgap.models.verify as verify_mod
from kernelgap.errors import KernelgapError
from kernelgap.models.constructions import build_construction
from kernelgap.models.verify import (
    MAX_VERIFY_PAIRS,
    check_exhaustive,
    check_size,
    expected_exact,
    rank1_max_error,
    verify_constructions,
)
from kernelgap.task.constructions import softmax_beta
from kernelgap.task.families.exhaustive import iter_exhaustive_index

CPU = torch.device("cpu")
NAMES = ("rank1", "softmax", "positive_2m")


def _by(payload: dict) -> dict:
    return {(c["construction"], c["N"]): c for c in payload["checks"]}


def _check_length_n(payload: dict, m: int, lengths) -> None:
    by = _by(payload)
    assert set(by) == {(name, n) for name in NAMES for n in lengths}
    for (name, n), c in by.items():
        assert c["sequences"] == 2 ** (m * n)
        if name == "rank1":
            assert c["max_error"] == pytest.approx(float(rank1_max_error(m, n)), abs=1e-9)
            assert c["exact"] is c["expected_exact"] is False
        else:
            assert c["max_error"] <= (n - 1) * math.exp(-softmax_beta(n)) + 1e-12  # = 1/(2e)
            assert c["exact"] is c["expected_exact"] is True
        assert c["as_expected"] is True
    assert payload["as_expected"] is True and payload["lengths"] == sorted(lengths)


@pytest.mark.parametrize("flags", [["--length", "4", "--length", "5"], ["--length", "5,4"], ["--length", "4..5"]])
def test_cli_m3_lengths_4_and_5(cli, flags):
    code, out, err = cli("verify", "--m", "3", *flags, "--json")
    assert code == 0, err
    _check_length_n(json.loads(out), 3, (4, 5))


def test_cli_m4_length_4_human_table(cli):
    code, out, _ = cli("verify", "--m", "4", "--length", "4")
    assert code == 0
    assert "as expected" in out and "fails" in out and out.strip().endswith("every outcome as expected")


def test_m4_length_5_every_sequence():
    """2^20 sequences of length 5 (the positive construction with β = ln 8 + 1)."""
    res = check_exhaustive(build_construction("positive_2m", 4, 5), 4, 5, CPU)
    assert res["sequences"] == 1 << 20 and res["exact"]
    assert res["max_error"] <= 4 * math.exp(-softmax_beta(5)) + 1e-12


def test_default_lengths_unchanged(cli):
    code, out, _ = cli("verify", "--m", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["lengths"] == [1, 2, 3] and data["as_expected"]
    got = [(c["construction"], c["N"], c["sequences"], round(c["max_error"], 6), c["exact"]) for c in data["checks"]]
    assert got == [
        ("rank1", 1, 8, 0.0, True),
        ("rank1", 2, 64, 0.0, True),
        ("rank1", 3, 512, 1.0, False),
        ("softmax", 1, 8, 0.0, True),
        ("softmax", 2, 64, 0.155362, True),
        ("softmax", 3, 512, 0.155362, True),
        ("positive_2m", 1, 8, 0.0, True),
        ("positive_2m", 2, 64, 0.155362, True),
        ("positive_2m", 3, 512, 0.155362, True),
    ]


def test_m1_rank1_is_exact_at_three_and_fails_from_four(cli):
    """At m = 1 rank 1 errs by 1/3 at N = 3 (exact, and expected so), by 1/2 at N = 4."""
    code, out, _ = cli("verify", "--m", "1", "--length", "1..4", "--json")
    by = _by(json.loads(out))
    assert code == 0
    assert by[("rank1", 3)]["exact"] and by[("rank1", 3)]["max_error"] == pytest.approx(1 / 3)
    assert not by[("rank1", 4)]["exact"] and by[("rank1", 4)]["max_error"] == pytest.approx(0.5)


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_rank1_max_error_formula_matches_every_sequence(m, n):
    res = check_exhaustive(build_construction("rank1", m, n), m, n, CPU)
    assert res["max_error"] == pytest.approx(float(rank1_max_error(m, n)), abs=1e-9)
    assert res["exact"] is expected_exact("rank1", m, n)


def _softmax_reference(m: int, n: int) -> float:
    """Dense softmax with q = −βx, k = z, v = z, p = <x, y>, written out in numpy."""
    beta = softmax_beta(n)
    worst = 0.0
    for seq in itertools.product(itertools.product((0, 1), repeat=m), repeat=n):
        x = np.array(seq, dtype=np.float64)  # [N, m]
        s = x @ x.T
        w = np.exp(-beta * s)
        w /= w.sum(axis=1, keepdims=True)
        pred = ((w @ x) * x).sum(axis=1)
        worst = max(worst, float(np.abs(pred - s.min(axis=1)).max()))
    return worst


@pytest.mark.parametrize("m,n", [(1, 5), (2, 4)])
def test_softmax_and_positive_match_an_independent_reference(m, n):
    ref = _softmax_reference(m, n)
    for name in ("softmax", "positive_2m"):
        assert check_exhaustive(build_construction(name, m, n), m, n, CPU)["max_error"] == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("m,n,chunk", [(1, 5, 7), (2, 4, 3), (3, 4, 1000), (2, 5, 1 << 20)])
def test_iter_exhaustive_index_lists_every_sequence_once_in_order(m, n, chunk):
    rows = np.concatenate(list(iter_exhaustive_index(m, n, chunk)))
    assert [tuple(r) for r in rows.tolist()] == list(itertools.product(range(1 << m), repeat=n))


def test_results_do_not_depend_on_the_chunk(monkeypatch):
    full = verify_constructions(2, lengths=(4,))
    monkeypatch.setattr(verify_mod, "CHUNK_PAIRS", 5)
    assert verify_constructions(2, lengths=(4,)) == full


def test_exit_1_when_an_outcome_is_not_the_expected_one(cli, monkeypatch):
    monkeypatch.setattr(verify_mod, "expected_exact", lambda name, m, n: True)  # rank 1 at N = 4 then "should" pass
    code, out, _ = cli("verify", "--m", "2", "--length", "4")
    assert code == 1 and "not as expected: rank1 at N = 4" in out
    code, out, _ = cli("verify", "--m", "2", "--length", "4", "--json")
    data = json.loads(out)
    assert code == 1 and not data["as_expected"]
    assert [c["construction"] for c in data["checks"] if not c["as_expected"]] == ["rank1"]


def test_size_limit_boundaries():
    check_size(9, 3)  # the largest default run
    check_size(4, 6)
    check_size(1, 21)
    for m, n in [(4, 7), (10, 3), (1, 22), (10**12, 3)]:
        with pytest.raises(KernelgapError, match="too large for exhaustive"):
            check_size(m, n)
    assert (1 << 27) * 9 == MAX_VERIFY_PAIRS


def test_cli_lengths_are_one_range(cli):
    """The repeated flag is one range of the common grammar (kernelgap.args), steps included."""
    code, out, err = cli("verify", "--m", "2", "--length", "1..5..2", "--length", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["lengths"] == [1, 2, 3, 5]


@pytest.mark.parametrize(
    "value,needle",
    [
        ("0", "must be ≥ 1, got 0"),
        ("-1", "must be ≥ 1, got -1"),
        ("2,-4", "must be ≥ 1, got -4"),
        ("7", "--m 4 at length N = 7 is too large for exhaustive checking: 2^28 sequences"),
        ("22", "--length 22 is too large"),
        (str(10**30), "too large"),
        ("x", "--length must look like A, A..B, A..B..STEP"),
        ("4..2", "the range 4..2 is empty"),
        ("", "--length must look like"),
        ("1..3..0", "the step of 1..3..0 must be ≥ 1"),
    ],
)
def test_bad_length_is_one_line_exit_2(cli, value, needle):
    code, out, err = cli("verify", "--m", "4", "--length", value)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert "Traceback" not in out + err


def test_bad_m_is_one_line_exit_2(cli):
    code, _, err = cli("verify", "--m", "13", "--length", "1")
    assert code == 2 and "use m ≤ 12" in err and len(err.strip().splitlines()) == 1


def test_rank1_max_error_is_exact_rational():
    assert rank1_max_error(6, 3) == 2 and rank1_max_error(4, 5) == Fraction(12, 5) and rank1_max_error(5, 2) == 0
