"""Finite-precision transcript bound (docs/experiments.md).

A deterministic sketch model whose cross-token channel carries symbols from a
finite alphabet must send at least ``q · log2(s + 1)`` bits to give ``q``
independent answers each taking ``s + 1`` values: the transcript has to single
out one of ``(s + 1)^q`` answer vectors.  A sketch with ``r`` features, value
dimension ``d``, ``h`` heads and ``b`` bits per number carries at most
``r · d · h · b`` bits; it can only carry the answers if that is at least the
number of bits needed, ``⌈log2((s + 1)^q)⌉``.
"""

from __future__ import annotations

import math

from ..errors import KernelgapError


def transcript_bits(answers: int, values: int) -> float:
    """``q · log2(s + 1)`` with ``values = s + 1``."""
    _positive(answers=answers, values=values)
    return answers * math.log2(values)


def transcript_bits_ceil(answers: int, values: int) -> int:
    """``⌈log2(values^answers)⌉``, exactly (the bits a transcript must have)."""
    _positive(answers=answers, values=values)
    return (values**answers - 1).bit_length()


def sketch_capacity(features: int, value_dim: int, heads: int, bits: int) -> int:
    """Bits a sketch can carry: ``features × value_dim × heads × bits``."""
    _positive(features=features, value_dim=value_dim, heads=heads, bits=bits)
    return features * value_dim * heads * bits


def transcript_bound(answers: int, values: int, features: int | None = None,
                     value_dim: int = 1, heads: int = 1, bits: int = 32) -> dict:
    """The bound, and (given ``features``) whether a sketch can possibly carry the answers."""
    out = {"answers": answers, "values": values,
           "bits_needed": transcript_bits(answers, values),
           "bits_needed_ceil": transcript_bits_ceil(answers, values)}
    if features is not None:
        cap = sketch_capacity(features, value_dim, heads, bits)
        out.update({"features": features, "value_dim": value_dim, "heads": heads, "bits": bits,
                    "capacity_bits": cap, "can_carry": cap >= out["bits_needed_ceil"]})
    return out


def _positive(**named: int) -> None:
    for key, value in named.items():
        if not isinstance(value, int) or value < 1:
            raise KernelgapError(f"{key} must be a positive integer, got {value!r}")
