"""A family series of the bound curve (docs/theory.md, "The wall in m"): what one ``--code``
is, as one object.

A :class:`Series` computes its curve against m (:meth:`Series.curve`), says which figure
draws it and how its payload reads as text; :class:`PointSeries` is the common shape of a
series with one point per m — its knobs, which m can have a family (the rest are skipped),
the registered family of the largest build at m (checked against the registry and the
memory limit before any is built), the point, and the payload's own fields.  The series
themselves are registered in :data:`kernelgap.theory.bound_curve.SERIES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from ..errors import KernelgapError
from ..limits import check_memory
from ..task.registry import check_values, memory_estimate


@dataclass(frozen=True)
class CurveOptions:
    """The knobs of a curve: the most ``queries`` per family (None: the series' default), the
    ``chain_step`` of the amplification chains, the ``seed`` of seeded codes and, for a series
    that :attr:`~Series.takes_delta`, the tolerances δ it is certified at (None: its default)."""

    queries: int | None = None
    chain_step: int = 4
    seed: int = 0
    deltas: tuple[Fraction, ...] | None = None


class Series:
    """One ``--code`` of ``kernelgap bound-curve``."""

    #: The ``--code`` that names it.
    name: str = ""
    #: The figure of its curve against m: ``"bound"`` (certified rank beside 2^m and m) or
    #: ``"wall"`` (the least context length certifying the whole code).
    figure: str = "bound"
    #: Whether it also has a curve against the context length N (``--length``).
    against_length: bool = False
    #: Whether it is certified at tolerances δ of the caller's (``--delta``); the others at 1/2.
    takes_delta: bool = False

    def curve(self, ms: list[int], options: CurveOptions, log=None) -> dict:
        """The payload of its curve against m."""
        raise NotImplementedError

    def length_curve(self, ms: list[int], lengths: list[int], options: CurveOptions, log=None) -> dict:
        """The payload of its curves against N, one per m (where :attr:`against_length`)."""
        raise NotImplementedError

    def lines(self, payload: dict) -> list[str]:
        """Its payload as text lines (:mod:`.text`)."""
        raise NotImplementedError


class PointSeries(Series):
    """A series with one point per m (module docstring)."""

    #: Most queries per family when ``--queries`` is not given.
    default_queries: int = 128

    def has_family(self, m: int) -> bool:
        """Whether m can have a family at all (arithmetic only; the rest are skipped)."""
        return True

    def family(self, m: int, options: CurveOptions) -> tuple[str, dict]:
        """The registered family (name, parameters) whose build matches its largest one at m."""
        raise NotImplementedError

    def point(self, m: int, options: CurveOptions, log=None) -> dict | None:
        """Its point at m, or None: no family at m."""
        raise NotImplementedError

    def extras(self, points: list[dict], options: CurveOptions) -> dict:
        """The payload's fields of its own, after the points."""
        return {}

    def curve(self, ms: list[int], options: CurveOptions, log=None) -> dict:
        """Every m's point, the m without a family listed as skipped; every m is checked first."""
        options = replace(options, queries=self.default_queries if options.queries is None else options.queries)
        if options.queries < 2 or options.chain_step < 1:
            raise KernelgapError("queries must be ≥ 2 and chain_step ≥ 1")
        self.check(ms, options)
        points, skipped = [], []
        for m in ms:
            point = self.point(m, options, log)
            if point is None:
                skipped.append(m)
            else:
                points.append(point)
        if not points:
            raise KernelgapError(f"no m in {ms[0]}..{ms[-1]} has a {self.name} family")
        payload = {"code": self.name, "queries_max": options.queries, "points": points, "skipped_m": skipped}
        return {**payload, **self.extras(points, options)}

    def check(self, ms: list[int], options: CurveOptions) -> None:
        """Before any family is built: every m's parameters pass the registry's type and range
        checks (:func:`~kernelgap.task.registry.check_values`: a bad seed is named) and its
        largest family's memory estimate is within the limit of :mod:`kernelgap.limits`."""
        for m in ms:
            if not self.has_family(m):
                continue
            name, params = self.family(m, options)
            full = check_values(name, params)
            check_memory(
                f"the {self.name} family at m = {m:,} with {options.queries:,} queries", memory_estimate(name, full)
            )


def common(m: int) -> dict:
    """The fields every point against m has: m, the positive construction's rank 2^m, softmax's m."""
    return {"m": m, "positive_construction": 2**m, "softmax_score_dim": m}


def growth_rate(points: list[dict]) -> dict | None:
    """Least-squares fit ``log2(certified) ≈ slope·m + intercept`` over the points."""
    pts = [(p["m"], math.log2(p["certified"])) for p in points if p.get("certified")]
    if len(pts) < 2:
        return None
    slope, intercept = np.polyfit(*zip(*pts), 1)
    return {"log2_per_m": float(slope), "intercept": float(intercept), "points": len(pts)}
