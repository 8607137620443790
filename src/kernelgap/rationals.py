"""Exact rationals from text: δ and thresholds as written by a user (``1/2``, ``0.4``,
``1e-30``, digits of any length) and back, past Python's int/str conversion guard.  Torch-
and numpy-free, so a profile's settings can be checked where no theory module may be imported."""

from __future__ import annotations

import re
from fractions import Fraction

from .errors import KernelgapError

#: Decimal digits converted at once between ints and strings (below Python's 4300-digit guard).
_DIGITS = 600
#: Largest decimal exponent accepted in δ (``1e-1000000``): a bigger one would take the
#: machine's memory before any certificate.
MAX_EXPONENT = 10**6
_RATIONAL = re.compile(
    r"""\s*(?P<sign>[-+]?)(?:
    (?P<num>\d+)\s*/\s*(?P<den>\d+)                       # p/q
  | (?P<int>\d*)(?:\.(?P<frac>\d*))?(?:[eE](?P<exp>[-+]?\d+))?  # decimal, optional exponent
)\s*\Z""",
    re.VERBOSE,
)


def int_from_digits(digits: str) -> int:
    """``int(digits)`` for a decimal string of any length (split in halves past
    Python's int/str conversion guard)."""
    if len(digits) <= _DIGITS:
        return int(digits)
    half = len(digits) // 2
    return int_from_digits(digits[:-half]) * 10**half + int_from_digits(digits[-half:])


def int_str(value: int) -> str:
    """``str(value)`` for an int of any size (split by a power of ten past the guard)."""
    if value < 0:
        return "-" + int_str(-value)
    if value.bit_length() <= 3 * _DIGITS:  # < 10^(0.9·_DIGITS) digits
        return str(value)
    half = int(value.bit_length() * 0.30103) // 2
    high, low = divmod(value, 10**half)
    return int_str(high) + int_str(low).rjust(half, "0")


def _shown(text) -> str:
    """A user's δ for an error message: its repr, cut to a readable length."""
    shown = repr(text) if isinstance(text, str) else (frac_str(text) if isinstance(text, Fraction) else repr(text))
    return shown if len(shown) <= 60 else shown[:40] + f"… ({len(shown)} characters)"


def _parse_rational(text: str) -> Fraction:
    """A decimal, ``p/q`` or ``1e-30`` string as an exact Fraction, digits of any length."""
    match = _RATIONAL.match(text)
    if not match or not (match["num"] or match["int"] or match["frac"]):
        raise ValueError(text)
    sign = -1 if match["sign"] == "-" else 1
    if match["num"] is not None:
        den = int_from_digits(match["den"])
        if den == 0:
            raise ZeroDivisionError(text)
        return Fraction(sign * int_from_digits(match["num"]), den)
    frac = match["frac"] or ""
    exp = int(match["exp"]) if match["exp"] else 0  # an exponent with > 4300 digits: ValueError
    if abs(exp) > MAX_EXPONENT:
        raise OverflowError(text)
    value = Fraction(int_from_digits((match["int"] or "") + frac or "0"), 10 ** len(frac))
    return sign * value * Fraction(10) ** exp


def parse_delta(text: str | Fraction | int) -> Fraction:
    """δ as an exact rational in ``(0, 1/2]``: ``"1/2"``, ``"0.4"``, ``"1e-30"``,
    ``"1/10000000000000000000"`` (digits of any length), a Fraction or an int."""
    try:
        delta = _parse_rational(text) if isinstance(text, str) else Fraction(text)
    except OverflowError:
        raise KernelgapError(f"delta's exponent is beyond ±{MAX_EXPONENT:,}, got {_shown(text)}") from None
    except (ValueError, ZeroDivisionError, TypeError):
        raise KernelgapError(f"delta must be a rational like 1/2 or 0.4, got {_shown(text)}") from None
    if not 0 < delta <= Fraction(1, 2):
        raise KernelgapError(f"delta must lie in (0, 1/2], got {_shown(text)}")
    return delta


def frac_str(x: Fraction) -> str:
    """``"p/q"``, digits of any length."""
    return f"{int_str(x.numerator)}/{int_str(x.denominator)}"
