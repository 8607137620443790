"""The layer series of the bound curve (``--code layer``; docs/theory.md, "Context length N"
and "The layer family").

It certifies the layer product family — the n words of the largest Graham–Sloane class of
the weight-m/2 layer, complements as candidates — at context length N, where gap
domination gives ``ρ_N = 2δ/((N − 2)(gap − 2δ))``:

* :func:`length_curve`: the certified rank against N at fixed m, beside n,
  ``C(m, m/2)`` and ``2^m``;
* :func:`wall_curve`: per m, the smallest N that certifies all n words.  Every pair
  of the class has ``ε_ij ε_ji ≤ 1/(N − 2)²`` (tight at distance 4), so the Radon
  bound reaches n once ``(N − 2)² ≥ n − 1``, i.e. from the guess
  ``N* = 2 + ⌈√(n − 1)⌉``.  The guess is only where the search starts: the
  certificates at ``N*`` (all n) and ``N* − 1`` (fewer) decide, and were either to
  disagree the search walks on (the rank is monotone in N: ρ_N falls with N).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

from ..errors import KernelgapError
from ..limits import MAX_CURVE_POINTS
from ..task import build_family
from ..task.families.layer import class_sizes
from ..task.family import MAX_PRODUCT_LENGTH
from ..task.registry import check_params
from .certificate import certify
from .construction import constructed_rank
from .series import CurveOptions, Series, growth_rate
from .text import layer_lines

#: The layer series' name; its code is the whole class, so it takes no query budget.
LAYER = "layer"
#: Tolerance of the layer certificates (max error < 1/2: a single step needs gap ≥ 2, the class's distance 4).
LAYER_DELTA = Fraction(1, 2)
#: Seconds of exact clique search per layer certificate: none, the greedy clique and the
#: whole-set test only (sound at any budget; the whole-set test alone decides "all n
#: certified", and at m = 12, N = 3..12 a 10 s exact search certified the same ranks).
LAYER_BUDGET_S = 0.0


def code_size(m: int) -> int:
    """n: the words of the layer family's default code at m, the largest Graham–Sloane class
    of the weight-m/2 layer (:func:`~kernelgap.task.families.layer.class_sizes`, exact)."""
    return max(class_sizes(m, m // 2))


def wall_guess(n: int) -> int:
    """``N* = 2 + ⌈√(n − 1)⌉`` (at least 3): the least N with ``(N − 2)² ≥ n − 1``, where the
    Radon bound first reaches all n words of a distance-4 code (module docstring)."""
    root = math.isqrt(n - 2) + 1 if n > 1 else 0  # ⌈√(n − 1)⌉
    return max(3, 2 + root)


def _check_ms(ms: list[int]) -> None:
    """Every m even, within the layer family's checks, with a code of two or more words."""
    odd = [m for m in ms if m % 2]
    if odd:
        raise KernelgapError(f"--code layer needs even m (the weight-m/2 layer), got m = {odd[0]}")
    for m in ms:
        check_params(LAYER, {"m": m})
        if code_size(m) < 2:
            raise KernelgapError(f"the layer code at m = {m} has {code_size(m)} word; a curve needs m ≥ 4")


def _check_builds(grid: dict[int, list[int]]) -> None:
    """Every build (m, N) within the registry's checks and the memory limit (one line otherwise)."""
    for m, lengths in grid.items():
        for length in lengths:
            check_params(LAYER, {"m": m, "length": length})


class LayerCertificates:
    """Certificates of the layer family by (m, N), each computed once (the curves share them)."""

    def __init__(self, log=None):
        self.log = log
        self._done: dict[tuple[int, int], tuple] = {}

    def __call__(self, m: int, length: int):
        """The certificate at (m, N)."""
        return self.family_and_certificate(m, length)[1]

    def family_and_certificate(self, m: int, length: int):
        key = (m, length)
        if key not in self._done:
            family = build_family(LAYER, m=m, length=length)
            cert = certify(family, LAYER_DELTA, budget_s=LAYER_BUDGET_S)
            if self.log:
                self.log(
                    f"layer m = {m}, N = {length}: certified {cert.certified_rank:,} of {cert.queries_total:,} "
                    f"({cert.seconds:.1f} s)"
                )
            self._done[key] = (family, cert)
        return self._done[key]

    def point(self, m: int, length: int) -> dict:
        """One point of a curve: the certified rank at (m, N) and both bounds behind it."""
        cert = self(m, length)
        return {
            "length": length,
            "certified": cert.certified_rank,
            "trace": cert.trace.rank,
            "radon": cert.radon.rank,
            "method": cert.method,
            "whole_set": cert.radon.whole_set,
            "seconds": round(cert.seconds, 3),
        }


def _layer_common(m: int, n: int) -> dict:
    return {"m": m, "n": n, "layer_size": math.comb(m, m // 2), "positive_construction": 2**m}


def length_curve(
    ms: list[int], lengths: list[int], wall: bool = False, certificates: LayerCertificates | None = None, log=None
) -> dict:
    """The certified rank against the context length N at each fixed m (one curve per m),
    with the code size n, ``C(m, m/2)`` and ``2^m``; ``full_from`` is the least N listed that
    certifies all n words and ``last_short`` the largest N listed below it that does not.
    With ``wall`` each curve also gets ``N* − 1`` and ``N*`` (:func:`wall_guess`).  At most
    :data:`~kernelgap.limits.MAX_CURVE_POINTS` certificates, all checked before the first."""
    if len(ms) * len(lengths) > MAX_CURVE_POINTS:
        raise KernelgapError(
            f"{len(ms):,} values of m times {len(lengths):,} of N give {len(ms) * len(lengths):,} points; "
            f"a curve has at most {MAX_CURVE_POINTS:,}"
        )
    _check_ms(ms)
    grid = {}
    for m in ms:
        guess = wall_guess(code_size(m))
        extra = {n for n in (guess - 1, guess) if 3 <= n <= MAX_PRODUCT_LENGTH} if wall else set()
        grid[m] = sorted(set(lengths) | extra)
    _check_builds(grid)
    at = certificates or LayerCertificates(log)
    curves = [_length_curve_at(m, ns, at) for m, ns in grid.items()]
    return {"code": LAYER, "against": "length", "delta": str(LAYER_DELTA), "lengths": lengths, "curves": curves}


def _length_curve_at(m: int, lengths: list[int], at: LayerCertificates) -> dict:
    """One curve of :func:`length_curve`: the points at m, where the whole code is first certified."""
    points = [at.point(m, length) for length in lengths]
    n = at(m, lengths[0]).queries_total
    full = [p["length"] for p in points if p["certified"] >= n]
    short = [p for p in points if p["certified"] < n and (not full or p["length"] < full[0])]
    return {
        **_layer_common(m, n),
        "wall_guess": wall_guess(n),
        "points": points,
        "full_from": full[0] if full else None,
        "last_short": {"length": short[-1]["length"], "certified": short[-1]["certified"]} if short else None,
    }


def _smallest_full(full: Callable[[int], bool], guess: int) -> int | None:
    """The least N in ``3..MAX_PRODUCT_LENGTH`` with ``full(N)``, for a monotone ``full``,
    starting at ``guess``: ``full(guess)`` and ``not full(guess − 1)`` settle it in two
    calls; otherwise a doubling walk away from the guess, then bisection."""
    lo_limit, hi_limit = 3, MAX_PRODUCT_LENGTH
    if full(guess):
        hi, step = guess, 1
        while True:  # walk down: hi is full, find a short lo below it
            if hi == lo_limit:
                return hi
            cand = max(lo_limit, hi - step)
            if not full(cand):
                lo = cand
                break
            hi, step = cand, step * 2
    else:
        lo, step = guess, 1
        while True:  # walk up: lo is short
            if lo == hi_limit:
                return None
            cand = min(hi_limit, lo + step)
            if full(cand):
                hi = cand
                break
            lo, step = cand, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if full(mid) else (mid, hi)
    return hi


def wall_point(m: int, certificates: LayerCertificates) -> dict:
    """At m: the smallest N whose certificate reaches every one of the n code words, found
    from :func:`wall_guess` and checked by the certificates at N (all n) and N − 1 (fewer);
    the rank there, ``log2 r / m``, and the constructed rank where the certificate's JSON
    records one (``proved_equals_constructed``: whether the two agree; None without it)."""
    n = code_size(m)
    guess = wall_guess(n)
    tried: list[int] = []

    def full(length: int) -> bool:
        tried.append(length)
        return certificates(m, length).certified_rank >= certificates(m, length).queries_total

    length = _smallest_full(full, guess)
    top = length if length is not None else max(tried)
    family, cert = certificates.family_and_certificate(m, top)
    below = length - 1 if length is not None and length > 3 else None
    constructed = constructed_rank(family, cert)
    return {
        **_layer_common(m, cert.queries_total),
        "predicted_length": guess,
        "length": length,
        "certified": cert.certified_rank,
        "method": cert.method,
        "below_length": below,
        "certified_below": certificates(m, below).certified_rank if below is not None else None,
        "formula_holds": length == guess,
        "log2_rank_per_m": math.log2(cert.certified_rank) / m,
        "log2_layer_per_m": math.log2(math.comb(m, m // 2)) / m,
        "constructed_rank": constructed,
        "proved_equals_constructed": None if constructed is None else constructed == cert.certified_rank,
        "tried": [{"length": t, "certified": certificates(m, t).certified_rank} for t in sorted(set(tried))],
    }


def wall_curve(ms: list[int], certificates: LayerCertificates | None = None, log=None) -> dict:
    """:func:`wall_point` at every m (all checked before the first certificate), with the
    least-squares growth of ``log2`` of the certified rank in m."""
    _check_ms(ms)
    _check_builds({m: [wall_guess(code_size(m))] for m in ms})
    at = certificates or LayerCertificates(log)
    points = [wall_point(m, at) for m in ms]
    return {"code": LAYER, "against": "m", "delta": str(LAYER_DELTA), "points": points, "growth": growth_rate(points)}


class LayerSeries(Series):
    """``--code layer``: against m the wall (:func:`wall_curve`), against N :func:`length_curve`."""

    name = LAYER
    figure = "wall"
    against_length = True

    def curve(self, ms: list[int], options: CurveOptions, log=None) -> dict:
        if options.queries is not None:
            raise KernelgapError("--queries does not apply to --code layer (its code is the whole class)")
        return wall_curve(ms, log=log)

    def length_curve(self, ms: list[int], lengths: list[int], log=None) -> dict:
        return length_curve(ms, lengths, log=log)

    def lines(self, payload: dict) -> list[str]:
        return layer_lines(payload)
