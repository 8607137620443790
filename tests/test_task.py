"""Min-IP targets and metrics (docs/theory.md, "The task") against brute-force references."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.task import Family, error_metrics, targets
from kernelgap.task.minip import MetricsAccumulator, targets_from_index


def brute_targets(seq):
    return [min(sum(a * b for a, b in zip(xi, xj)) for xj in seq) for xi in seq]


@st.composite
def sequences(draw):
    m = draw(st.integers(1, 7))
    n = draw(st.integers(1, 5))
    return [[draw(st.integers(0, 1)) for _ in range(m)] for _ in range(n)]


@given(sequences())
def test_targets_match_brute_force(seq):
    got = targets(torch.tensor(seq, dtype=torch.float64)).tolist()
    assert got == brute_targets(seq)


@given(st.lists(sequences(), min_size=1, max_size=6).filter(lambda seqs: len({(len(s), len(s[0])) for s in seqs}) == 1))
def test_family_targets_match_brute_force(seqs):
    fam = Family.from_sequences(np.array(seqs, dtype=np.uint8))
    assert fam.targets().tolist() == [brute_targets(s) for s in seqs]
    # the token/index representation round-trips to the dense bits
    assert (fam.sequences_bits() == np.array(seqs)).all()


def test_target_includes_self_so_bounded_by_weight():
    seq = torch.tensor([[1.0, 1, 0], [1, 1, 1]])
    assert targets(seq).tolist() == [2, 2]


def test_metrics_exact_threshold_is_strict():
    t = torch.zeros(2, 1)
    assert error_metrics(t + 0.49, t).exact
    assert not error_metrics(t + 0.5, t).exact
    m = error_metrics(torch.tensor([[0.0, 0.7], [0.1, 0.2]], dtype=torch.float64), torch.zeros(2, 2))
    assert m.max_error == 0.7 and m.exact_seq_acc == 0.5
    assert abs(m.mean_abs_error - 0.25) < 1e-12


def test_nan_prediction_is_never_exact():
    m = error_metrics(torch.tensor([[float("nan")]]), torch.zeros(1, 1))
    assert not m.exact and m.exact_seq_acc == 0.0


def test_accumulator_equals_one_shot():
    g = torch.Generator().manual_seed(0)
    pred, tgt = torch.rand(50, 3, generator=g) * 2, torch.zeros(50, 3)
    acc = MetricsAccumulator()
    for lo in range(0, 50, 7):
        acc.update(pred[lo : lo + 7], tgt[lo : lo + 7])
    assert acc.result() == error_metrics(pred, tgt)


def test_targets_from_index_numpy_and_torch_agree():
    gram = np.array([[2, 1], [1, 3]])
    index = np.array([[0, 1, 1], [1, 1, 1]])
    a = targets_from_index(gram, index)
    b = targets_from_index(torch.from_numpy(gram), torch.from_numpy(index))
    assert a.tolist() == b.tolist() == [[1, 1, 1], [3, 3, 3]]
