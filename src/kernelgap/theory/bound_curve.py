"""The certified rank against m for a whole family series (docs/theory.md, "The wall in m").

The series, one object per ``--code`` in :data:`SERIES` (a new series is one object added):

* ``hadamard``: the witness family of all ``m − 1`` codewords of a normalized Hadamard matrix
  (m with a construction, :func:`~kernelgap.task.codes.hadamard_orders`), certified with
  direct comparisons and with chains of intermediate candidates;
* ``cw``: the same for a seeded random constant-weight code (weight ``m/2``, pairwise overlap
  ≤ ``3m/8``, at most ``queries`` words);
* ``ladder``: the ladder product family (:mod:`kernelgap.task.families.ladder`): per m the
  largest number of queries certified in full (doubling, then bisection to within an eighth),
  its certificate, and dense softmax's construction checked on a random sample of the
  family's sequences (:func:`kernelgap.models.verify.softmax_check`);
* ``layer``: the layer family at context length N, at each tolerance δ of ``--delta``
  (:mod:`.layer_curve`).

Beside them: the exact positive construction (rank ``2^m``, an upper bound on the features
nonnegative kernels need) and dense softmax, exact with ``m``-dimensional scores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..errors import FamilyError, KernelgapError
from ..limits import check_memory
from ..rationals import parse_delta
from ..task import build_family
from ..task.codes import hadamard_code, hadamard_orders, random_constant_weight
from ..task.families.witness import witness_from_code
from ..task.registry import check_values, memory_estimate
from .certificate import certify
from .layer_curve import growth_rate, length_curve, wall_curve
from .text import code_curve_lines, ladder_curve_lines, layer_lines


@dataclass(frozen=True)
class CurveOptions:
    """The knobs of a curve: the most ``queries`` per family (None: the series' default), the
    ``chain_step`` of the amplification chains, the ``seed`` of seeded codes and, for a series
    that :attr:`~Series.takes_delta`, the tolerances δ (None: its default)."""

    queries: int | None = None
    chain_step: int = 4
    seed: int = 0
    deltas: tuple[Fraction, ...] | None = None


class Series:
    """One ``--code``: ``curve(ms, options, log)`` gives its payload against m,
    ``lines(payload)`` the payload as text (:mod:`.text`) and, where :attr:`against_length`,
    ``length_curve(ms, lengths, options, log)`` its curves against N."""

    name: str = ""
    #: The figure against m: ``"bound"`` (certified rank beside 2^m and m) or ``"wall"`` (the
    #: least context length certifying the whole code).
    figure: str = "bound"
    against_length: bool = False
    #: Certified at the caller's tolerances δ (``--delta``); the others at 1/2.
    takes_delta: bool = False


class PointSeries(Series):
    """A series with one point per m: ``family(m, options)`` names the registered family
    (name, parameters) of its largest build at m, ``point(m, options, log)`` gives the point
    (None: no family at m) and :meth:`extras` the payload's own fields."""

    #: Most queries per family when ``--queries`` is not given.
    default_queries: int = 128

    def has_family(self, m: int) -> bool:
        """Whether m can have a family at all (arithmetic only; the rest are skipped)."""
        return True

    def extras(self, points: list[dict], options: CurveOptions) -> dict:
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
        """Before any family is built: every m's parameters pass the registry's checks
        (:func:`~kernelgap.task.registry.check_values`) and its largest family's memory
        estimate is within the limit of :mod:`kernelgap.limits`."""
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


def _hadamard_code(m: int, queries: int) -> np.ndarray | None:
    if m % 4 or m not in hadamard_orders(m, m):
        return None
    return hadamard_code(m)[:queries]


def _cw_code(m: int, queries: int) -> np.ndarray | None:
    code = random_constant_weight(m, m // 2, (3 * m) // 8, queries, seed=0, max_tries=20_000, require_count=False)
    return code if len(code) >= 2 else None


class CodeSeries(PointSeries):
    """The witness family of a code at each m, certified directly and with chains.
    ``words(m, queries)``: the code's words at m (at most ``queries``; None: no code at m);
    ``params(m, options)``: the registered family's parameters that build the same family;
    ``valid_m(m)``: whether m can have a code at all (arithmetic only)."""

    def __init__(
        self,
        name: str,
        words: Callable[[int, int], np.ndarray | None],
        params: Callable[[int, CurveOptions], dict],
        valid_m: Callable[[int], bool] = lambda m: True,
    ):
        self.name, self.words, self.params, self.has_family = name, words, params, valid_m

    def family(self, m: int, options: CurveOptions) -> tuple[str, dict]:
        return self.name, self.params(m, options)

    def point(self, m: int, options: CurveOptions, log=None) -> dict | None:
        words = self.words(m, options.queries)
        if words is None:
            return None
        direct, chained = (
            certify(witness_from_code(words, chain_step=options.chain_step * k, name=f"{self.name}-m{m}"))
            for k in (0, 1)
        )
        return {
            **common(m),
            "queries": direct.queries_total,
            "sequences_direct": direct.sequences,
            "sequences_chained": chained.sequences,
            "certified_direct": direct.certified_rank,
            "trace_direct": direct.trace.rank,
            "certified_chained": chained.certified_rank,
            "trace_chained": chained.trace.rank,
        }

    def extras(self, points: list[dict], options: CurveOptions) -> dict:
        return {"chain_step": options.chain_step}

    lines = staticmethod(code_curve_lines)


class LadderSeries(PointSeries):
    """Per m the largest ladder family whose every query is certified (module docstring)."""

    name = "ladder"
    default_queries = 8192

    def family(self, m: int, options: CurveOptions) -> tuple[str, dict]:
        return "ladder", {"m": m, "n": options.queries, "seed": options.seed}

    def point(self, m: int, options: CurveOptions, log=None) -> dict | None:
        point = ladder_point(m, options.queries, options.seed, log)
        return None if point["queries"] is None else point

    def extras(self, points: list[dict], options: CurveOptions) -> dict:
        return {"seed": options.seed, "growth": growth_rate(points)}

    lines = staticmethod(ladder_curve_lines)


def ladder_point(m: int, max_queries: int, seed: int = 0, log=None) -> dict:
    """The largest ladder family at m whose every query is certified (module docstring); no
    exact clique search is needed to tell (the whole set is tested first)."""
    tried, best = [], None

    def attempt(n: int) -> bool:
        nonlocal best
        try:
            family = build_family("ladder", m=m, n=n, seed=seed)
        except FamilyError as exc:  # no code of that size under the overlap cap
            tried.append({"n": n, "certified": None, "why": str(exc)})
            return False
        cert = certify(family, budget_s=0)
        full = cert.certified_rank >= n
        tried.append(
            {"n": n, "certified": cert.certified_rank, "trace": cert.trace.rank, "seconds": round(cert.seconds, 2)}
        )
        if log:
            log(f"ladder m = {m}, n = {n}: certified {cert.certified_rank} ({cert.seconds:.1f} s)")
        if full and (best is None or n > best[0]):
            best = (n, family, cert)
        return full

    good, bad, n = 1, None, 2
    while n <= max_queries:
        if not attempt(n):
            bad = n
            break
        good, n = n, n * 2
    while bad is not None and bad - good > max(1, good // 8):
        mid = (good + bad) // 2
        good, bad = (mid, bad) if attempt(mid) else (good, mid)
    point = {**common(m), "tried": tried, "limit_reached": bad is None}
    return {**point, "queries": None, "certified": None} if best is None else {**point, **_ladder_fields(*best)}


def _ladder_fields(n: int, family, cert) -> dict:
    from ..models.verify import softmax_check  # torch, only where a ladder family is certified

    return {
        "queries": n,
        "certified": cert.certified_rank,
        "trace": cert.trace.rank,
        "radon": cert.radon.rank,
        "max_product": str(cert.radon.max_product),
        "candidates": len(family.candidates),
        "sequences": len(family),
        "ladder": family.meta["ladder"],
        "softmax": softmax_check(family),
    }


class LayerSeries(Series):
    """``--code layer``: against m the wall (:func:`~.layer_curve.wall_curve`), against N
    :func:`~.layer_curve.length_curve`, at each δ of ``options.deltas``."""

    name = "layer"
    figure = "wall"
    against_length = True
    takes_delta = True

    def curve(self, ms: list[int], options: CurveOptions, log=None) -> dict:
        if options.queries is not None:
            raise KernelgapError("--queries does not apply to --code layer (its code is the whole class)")
        return wall_curve(ms, log=log, deltas=options.deltas)

    def length_curve(self, ms: list[int], lengths: list[int], options: CurveOptions, log=None) -> dict:
        return length_curve(ms, lengths, log=log, deltas=options.deltas)

    lines = staticmethod(layer_lines)


#: Every series, by its ``--code``.
SERIES: dict[str, Series] = {
    s.name: s
    for s in (
        CodeSeries(
            "hadamard",
            _hadamard_code,
            lambda m, o: {"m": m, "n": min(o.queries, m - 1), "chain_step": o.chain_step},
            valid_m=lambda m: m % 4 == 0,
        ),
        CodeSeries(
            "cw",
            _cw_code,
            lambda m, o: {
                "m": m,
                "weight": m // 2,
                "max_overlap": (3 * m) // 8,
                "n": o.queries,
                "chain_step": o.chain_step,
            },
        ),
        LadderSeries(),
        LayerSeries(),
    )
}


def series(code: str) -> Series:
    """The series ``--code`` names (one line naming the codes otherwise)."""
    if code not in SERIES:
        raise KernelgapError(f"--code must be one of {', '.join(SERIES)}, got {code!r}")
    return SERIES[code]


def bound_curve(
    code: str,
    ms: list[int],
    queries: int | None = None,
    chain_step: int = 4,
    seed: int = 0,
    lengths: list[int] | None = None,
    log=None,
    deltas: list[Fraction | str] | None = None,
) -> dict:
    """The curve's numbers for every m that has a family (the rest listed as skipped); with
    ``lengths``, the curves against the context length N at each m; with ``deltas``, a series
    that takes them certified at each tolerance δ."""
    chosen = series(code)
    deltas = None if deltas is None else [parse_delta(d.strip() if isinstance(d, str) else d) for d in deltas]
    if deltas is not None and not chosen.takes_delta:
        takes = ", ".join(s.name for s in SERIES.values() if s.takes_delta)
        raise KernelgapError(f"--delta applies to --code {takes} only, got --code {code}")
    options = CurveOptions(queries, chain_step, seed, None if deltas is None else tuple(deltas))
    if lengths is None:
        return chosen.curve(ms, options, log=log)
    if not chosen.against_length:
        against = ", ".join(s.name for s in SERIES.values() if s.against_length)
        raise KernelgapError(f"--length applies to --code {against} only, got --code {code}")
    return chosen.length_curve(ms, lengths, options, log=log)


def figure_of(payload: dict) -> tuple[str, str]:
    """The file stem and figure kind (:attr:`Series.figure`, or ``"length"``) of a curve payload."""
    if payload.get("against") == "length":
        return f"bound-curve-{payload['code']}-length", "length"
    return f"bound-curve-{payload['code']}", series(payload["code"]).figure


def check_curve_out(out: Path, stem: str, force: bool) -> None:
    """``--out`` of ``bound-curve``, checked before a file is written: not a folder holding
    (or inside) a sweep, probe or reproduction; no earlier curve of this name (``stem``.*)
    there unless ``force``; none of its files a symbolic link."""
    from ..folders import refuse_link_at, refuse_other_result

    refuse_other_result(out, "bound-curve", inside=("sweep", "probe", "reproduction"))
    earlier = sorted(out.glob(f"{stem}.*")) if out.is_dir() else []
    for path in earlier:
        refuse_link_at(out, path)
    if earlier and not force:
        raise KernelgapError(f"--out {out} holds an earlier curve ({earlier[0].name}); --force replaces it")


def curve_lines(payload: dict) -> list[str]:
    """A curve payload as text lines, by its series."""
    return series(payload["code"]).lines(payload)


def write_curve(payload: dict, out: Path, force: bool = False) -> list[str]:
    """The curve's JSON and figures in ``out``, named by :func:`figure_of` (the layer series
    against m: the wall and ratio figures, :mod:`kernelgap.report.figures`), once
    :func:`check_curve_out` allows it."""
    from ..io import atomic_write_json
    from ..report.figures import draw_bound_curve, draw_length_curve, draw_wall_and_ratio

    stem, figure = figure_of(payload)
    draw = {"bound": draw_bound_curve, "wall": draw_wall_and_ratio, "length": draw_length_curve}[figure]
    check_curve_out(out, stem, force)
    try:
        atomic_write_json(out / f"{stem}.json", payload, out)
        return [str(out / f"{stem}.json")] + [str(out / f) for f in draw(payload, out, stem)]
    except OSError as exc:
        raise KernelgapError(f"cannot write to {out}: {exc.strerror or exc}") from None
