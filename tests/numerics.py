"""Comparing two computations of the same numbers, portably.

Bitwise equality holds only for the *same* computation repeated (same machine, same
``ATEN_CPU_CAPABILITY``, same thread count).  Two different computations of one quantity
(a batch against the whole, blocks against the dense product, another reduction order) may
differ in the last bits, and by how much depends on the SIMD kernels PyTorch picked: such
results are compared within the rounding-error bound of a floating-point sum.
"""

from __future__ import annotations

import torch

#: headroom over the first-order bound (a division and a subtraction follow the sums)
SLACK = 4


def sum_tolerance(dtype: torch.dtype, terms: int, scale: float) -> float:
    """Two evaluations of a sum of ``terms`` terms whose magnitudes add up to ``scale`` differ
    by at most ``2 (terms − 1) u · scale`` (u the unit roundoff, recursive summation, any order);
    times :data:`SLACK`."""
    return SLACK * 2 * max(terms - 1, 1) * torch.finfo(dtype).eps / 2 * scale


def assert_same_sums(a: torch.Tensor, b: torch.Tensor, terms: int) -> None:
    """``a`` and ``b`` are two computations of sums of ``terms`` terms: equal in shape and
    dtype, and within :func:`sum_tolerance` of each other at the larger magnitude."""
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    scale = max(float(a.abs().max()), float(b.abs().max()), 1.0)
    tol = sum_tolerance(a.dtype, terms, scale)
    worst = float((a - b).abs().max())
    assert worst <= tol, f"differ by {worst:.3g} > {tol:.3g} ({terms} terms, {a.dtype})"
