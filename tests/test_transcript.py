"""Finite-precision transcript bound (docs/experiments.md)."""

import json
import math

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.theory.transcript import (
    sketch_capacity,
    transcript_bits,
    transcript_bits_ceil,
    transcript_bound,
)


def test_bits_needed():
    assert transcript_bits(16, 7) == pytest.approx(16 * math.log2(7))
    assert transcript_bits(10, 2) == 10 and transcript_bits(5, 1) == 0
    assert transcript_bits_ceil(16, 7) == 45  # 7^16 ≈ 3.3e13 < 2^45
    assert transcript_bits_ceil(10, 2) == 10 and transcript_bits_ceil(3, 1) == 0
    assert transcript_bits_ceil(1000, 3) == math.ceil(1000 * math.log2(3))


def test_capacity_and_verdict():
    assert sketch_capacity(8, 4, 2, 16) == 1024
    assert transcript_bound(16, 7, features=8, value_dim=2, bits=3)["can_carry"] is True  # 48 ≥ 45
    assert transcript_bound(16, 7, features=8, value_dim=2, bits=2)["can_carry"] is False  # 32 < 45
    assert "capacity_bits" not in transcript_bound(4, 2)


@pytest.mark.parametrize("args", [(0, 2), (3, 0), (2.5, 2)])
def test_bad_inputs(args):
    with pytest.raises(KernelgapError):
        transcript_bound(*args)


def test_cli(cli):
    code, out, _ = cli(
        "bound",
        "transcript",
        "--answers",
        "16",
        "--values",
        "7",
        "--features",
        "8",
        "--value-dim",
        "2",
        "--bits",
        "2",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["bits_needed_ceil"] == 45 and data["capacity_bits"] == 32
    assert data["can_carry"] is False
    code, out, _ = cli("bound", "transcript", "--answers", "4", "--values", "2")
    assert code == 0 and "4 bits" in out
    code, _, err = cli("bound", "transcript", "--answers", "0", "--values", "2")
    assert code == 2 and "answers" in err and len(err.strip().splitlines()) == 1
