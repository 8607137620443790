"""Binary codes: Hadamard (Sylvester, Paley) and constant-weight codes (docs/experiments.md)."""

import numpy as np
import pytest

from kernelgap.errors import FamilyError
from kernelgap.task.codes import (
    check_constant_weight,
    greedy_constant_weight,
    hadamard_code,
    hadamard_matrix,
    hadamard_orders,
    paley_matrix,
    random_constant_weight,
)


@pytest.mark.parametrize("order", [1, 2, 4, 8, 12, 20, 24, 40, 44, 48, 96])
def test_hadamard_matrix_is_normalized_and_orthogonal(order):
    h = hadamard_matrix(order)
    assert h.shape == (order, order)
    assert set(np.unique(h)) <= {-1, 1}
    assert (h[0] == 1).all() and (h[:, 0] == 1).all()
    assert np.array_equal(h @ h.T, order * np.eye(order, dtype=np.int64))


def test_paley_needs_prime_three_mod_four():
    assert np.array_equal(np.abs(paley_matrix(7)), np.ones((8, 8), dtype=np.int64))
    for q in (5, 9, 13, 15):
        with pytest.raises(FamilyError):
            paley_matrix(q)


def test_orders_without_a_construction_are_refused():
    assert 28 not in hadamard_orders(4, 100) and 24 in hadamard_orders(4, 100)
    with pytest.raises(FamilyError, match="no Hadamard construction"):
        hadamard_matrix(28)
    with pytest.raises(FamilyError, match="divisible by 4"):
        hadamard_code(6)


def test_hadamard_code_24_weight_and_overlap():
    code = hadamard_code(24)
    assert code.shape == (23, 24) and code.dtype == np.uint8
    gram = code.astype(int) @ code.T.astype(int)
    assert (np.diag(gram) == 12).all()
    assert (gram[~np.eye(23, dtype=bool)] == 6).all()
    assert len({row.tobytes() for row in code}) == 23


def test_check_constant_weight_catches_violations():
    code = hadamard_code(8)
    check_constant_weight(code, 4, 2, exact_overlap=True)
    with pytest.raises(AssertionError):
        check_constant_weight(code, 4, 1)
    bad = code.copy()
    bad[0, 0] ^= 1
    with pytest.raises(AssertionError):
        check_constant_weight(bad, 4, 2)


def test_greedy_code_is_lexicographic_and_capped():
    code = greedy_constant_weight(8, 3, 1, 4)
    check_constant_weight(code, 3, 1)
    assert code[0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    assert code[1].tolist() == [1, 0, 0, 1, 1, 0, 0, 0]
    with pytest.raises(FamilyError, match="only"):
        greedy_constant_weight(6, 3, 0, 3)


def test_random_code_is_seeded():
    a = random_constant_weight(20, 6, 2, 12, seed=1)
    b = random_constant_weight(20, 6, 2, 12, seed=1)
    c = random_constant_weight(20, 6, 2, 12, seed=2)
    check_constant_weight(a, 6, 2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(FamilyError, match="found only"):
        random_constant_weight(8, 4, 0, 3, max_tries=512)
    assert len(random_constant_weight(8, 4, 0, 3, max_tries=512, require_count=False)) == 2


@pytest.mark.parametrize("args", [(8, 0, 0, 2), (8, 9, 0, 2), (8, 4, 4, 2), (8, 4, 1, 0)])
def test_bad_code_parameters(args):
    with pytest.raises(FamilyError):
        greedy_constant_weight(*args)
