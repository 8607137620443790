"""Shared helpers of the report's sentences, each computed from ``summary.json``, never typed in."""

from __future__ import annotations


def fmt(x, spec: str = ".2f") -> str:
    """``–`` for a missing value, floats with ``spec``, anything else as ``str``."""
    if x is None:
        return "–"
    return format(x, spec) if isinstance(x, float) else str(x)


def reached(value, top, unit: str = "") -> str:
    """A transition, or how far the grid went without reaching it."""
    if value is not None:
        return f"{unit}{value}"
    return f"not reached up to {unit}{top}" if top is not None else "not run"


def exact_from(value, top, unit: str = "r") -> str:
    return f"exact from {unit} = {value}" if value is not None else f"not exact up to {unit} = {top}"


def share(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{100 * lo:.0f} %" if round(100 * lo) == round(100 * hi) else f"{100 * lo:.0f}–{100 * hi:.0f} %"


def of(hits: int, total: int) -> str:
    """``3 of 5``: a count among a total (a conclusion of :mod:`kernelgap.reproduction.compare`)."""
    return f"{hits} of {total}"


def yes_no(value) -> str:
    """``yes``, ``no``, or ``–`` for a verdict not reached (``None``)."""
    return "–" if value is None else ("yes" if value else "no")
