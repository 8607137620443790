"""Finite-precision transcript bound (docs/experiments.md).

A deterministic sketch model whose cross-token channel carries symbols from a
finite alphabet must send at least ``q · log2(s + 1)`` bits to give ``q``
independent answers each taking ``s + 1`` values: the transcript has to single
out one of ``(s + 1)^q`` answer vectors.  A sketch with ``r`` features, value
dimension ``d``, ``h`` heads and ``b`` bits per number carries at most
``r · d · h · b`` bits; it can only carry the answers if that is at least the
number of bits needed, ``⌈log2((s + 1)^q)⌉``.

The power ``(s + 1)^q`` is never formed (it has ``q · log2(s + 1)`` bits, too
many to hold for a large ``q``): both numbers come from logarithms, the whole
bits exactly (:func:`transcript_bits_ceil`).
"""

from __future__ import annotations

import decimal
import math

from ..errors import KernelgapError
from ..validation import PositiveInt, fits

#: Guard digits of the first decimal evaluation of ``q · log2(s + 1)``; each further
#: round doubles them (:func:`transcript_bits_ceil`).
_GUARD_DIGITS = 30
_GUARD_ROUNDS = 6


def transcript_bits(answers: int, values: int) -> float:
    """``q · log2(s + 1)`` with ``values = s + 1`` (refused beyond a float's range)."""
    _positive(answers=answers, values=values)
    try:
        bits = answers * math.log2(values)
    except OverflowError:
        bits = math.inf
    if not math.isfinite(bits):
        raise KernelgapError(
            f"answers × log2(values) is beyond a float's range (answers has {len(str(answers)):,} digits)"
        )
    return bits


def transcript_bits_ceil(answers: int, values: int) -> int:
    """``⌈log2(values^answers)⌉`` exactly, without forming ``values^answers``.

    Why it is exact: for ``values = 2^k`` it is ``answers · k``.  Otherwise
    ``log2(values)`` is irrational (``2^a = values^b`` with ``b ≥ 1`` would make
    ``values`` a power of 2), so ``L = answers · log2(values)`` is not an integer
    and ``⌈L⌉ = ⌊L⌋ + 1``.  ``L`` is evaluated in decimal arithmetic with
    ``P = D + G`` significant digits, ``D`` bounding the digits of ``L``'s
    integer part and ``G`` guard digits: the two logarithms are correctly
    rounded and the quotient and product add one rounding each, so the relative
    error is below ``4 · ½ · 10^(1−P)`` and the absolute error below
    ``2 · 10^(1−G) < 10^(2−G)``.  ``⌊L⌋`` is taken only when the computed value
    lies farther than that from an integer; else the guard digits double
    (``L`` is irrational, so enough digits decide it), at most
    ``_GUARD_ROUNDS`` times, after which the request is refused.
    """
    _positive(answers=answers, values=values)
    if values & (values - 1) == 0:  # a power of 2 (1 included)
        return answers * (values.bit_length() - 1)
    # L < answers · bit_length(values) < 2^(answers.bit_length() + bit_length(bit_length))
    digits = int((answers.bit_length() + values.bit_length().bit_length()) * math.log10(2)) + 2
    guard = _GUARD_DIGITS
    for _ in range(_GUARD_ROUNDS):
        with decimal.localcontext() as ctx:
            ctx.prec, ctx.Emax, ctx.Emin = digits + guard, decimal.MAX_EMAX, decimal.MIN_EMIN
            ctx.traps[decimal.Inexact] = False
            value = decimal.Decimal(answers) * (decimal.Decimal(values).ln() / decimal.Decimal(2).ln())
            floor = int(value.to_integral_value(rounding=decimal.ROUND_FLOOR))
            margin = decimal.Decimal(10) ** (2 - guard)
            if value - floor > margin and floor + 1 - value > margin:
                return floor + 1
        guard *= 2
    raise KernelgapError(f"cannot decide ⌈{answers} × log2({values})⌉ exactly")  # pragma: no cover


def sketch_capacity(features: int, value_dim: int, heads: int, bits: int) -> int:
    """Bits a sketch can carry: ``features × value_dim × heads × bits``."""
    _positive(features=features, value_dim=value_dim, heads=heads, bits=bits)
    return features * value_dim * heads * bits


def transcript_bound(
    answers: int, values: int, features: int | None = None, value_dim: int = 1, heads: int = 1, bits: int = 32
) -> dict:
    """The bound, and (given ``features``) whether a sketch can possibly carry the answers.
    Every sketch option is checked whether or not ``features`` is given."""
    _positive(
        answers=answers,
        values=values,
        value_dim=value_dim,
        heads=heads,
        bits=bits,
        **({} if features is None else {"features": features}),
    )
    out = {
        "answers": answers,
        "values": values,
        "bits_needed": transcript_bits(answers, values),
        "bits_needed_ceil": transcript_bits_ceil(answers, values),
    }
    if features is not None:
        cap = sketch_capacity(features, value_dim, heads, bits)
        out.update(
            {
                "features": features,
                "value_dim": value_dim,
                "heads": heads,
                "bits": bits,
                "capacity_bits": cap,
                "can_carry": cap >= out["bits_needed_ceil"],
            }
        )
    return out


def _positive(**named: int) -> None:
    for key, value in named.items():
        if not fits(PositiveInt, value):
            raise KernelgapError(f"{key} must be a positive integer, got {value!r}")
