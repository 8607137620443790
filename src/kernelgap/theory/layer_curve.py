"""The layer series of the bound curve (``--code layer``; docs/theory.md, "Context length N",
"The layer family" and "The whole set by rule").

At tolerance δ it certifies the layer product family at context length N, where gap
domination gives ``ρ_N(g, δ) = 2δ/((N − 2)(g − 2δ))``, with the code the least usable gap
``g* = ⌊2δ⌋ + 1`` allows (:func:`layer_distance`):

* δ = 1/2 (g* = 2): the n words of the largest Graham–Sloane class of the weight-m/2
  layer (distance 4), complements as candidates; every pair has ``ε_ij ε_ji ≤ 1/(N − 2)²``
  (tight at distance 4), so the Radon bound reaches n once ``(N − 2)² ≥ n − 1``:
  ``N* = 2 + ⌈√(n − 1)⌉``;
* δ < 1/2 (g* = 1): the whole middle layer (distance 2), ``n = C(m, m/2)``; with
  ``c = 2δ/(1 − 2δ)`` every pair has ``ε_ij ε_ji ≤ c²/(N − 2)²`` and the test is strict, so
  all n words are certified once ``(N − 2)² > c²(n − 1)``: ``N* = 3 + ⌊√(c²(n − 1))⌋``
  (``3 + ⌊√(16(n − 1))⌋`` at δ = 2/5).

:func:`length_curve` gives the certified rank against N at fixed m, beside n,
``C(m, m/2)`` and ``2^m``; :func:`wall_curve` per m the smallest N that certifies all n
words, with the rank's share of ``2^m`` beside the ceiling of every pair certificate
(:mod:`.ceiling`).  The guess ``N*`` is only where the search starts: the certificates at
``N*`` (all n) and ``N* − 1`` (fewer) decide, and were either to disagree the search walks
on (the rank is monotone in N: ρ_N falls with N).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ..errors import KernelgapError
from ..limits import MAX_CURVE_POINTS
from ..task import build_family
from ..task.families.layer import class_sizes
from ..task.family import MAX_PRODUCT_LENGTH
from ..task.registry import check_params
from .ceiling import certificate_ceiling, usable_gap
from .certificate import certify
from .construction import constructed

#: The layer series' name; its code is the whole class, so it takes no query budget.
LAYER = "layer"
#: Default tolerance of the layer certificates (max error < 1/2: a single step needs gap ≥ 2,
#: the Graham–Sloane classes' distance 4).
LAYER_DELTA = Fraction(1, 2)
#: Seconds of exact clique search per layer certificate: none, the greedy clique and the
#: whole-set test only (sound at any budget; the whole-set test alone decides "all n
#: certified", and at m = 12, N = 3..12 a 10 s exact search certified the same ranks).
LAYER_BUDGET_S = 0.0


def layer_distance(delta: Fraction = LAYER_DELTA) -> int:
    """The layer family's code distance at δ, ``2g*`` with ``g* = usable_gap(δ)``: a gap-g*
    step needs overlaps ``h = d/2 ≥ g*``, so 4 (a Graham–Sloane class) at δ = 1/2 and 2 (the
    whole layer) below."""
    return 2 * usable_gap(delta)


def code_size(m: int, delta: Fraction = LAYER_DELTA) -> int:
    """n: the words of the layer code at m and δ — the whole layer ``C(m, m/2)`` below 1/2,
    the largest Graham–Sloane class of the weight-m/2 layer at 1/2
    (:func:`~kernelgap.task.families.layer.class_sizes`, exact)."""
    if layer_distance(delta) == 2:
        return math.comb(m, m // 2)
    return max(class_sizes(m, m // 2))


def _pair_scale(delta: Fraction) -> Fraction:
    """``c² = (2δ/(g* − 2δ))²``: every pair's ``ε_ij ε_ji ≤ c²/(N − 2)²`` at the least gap."""
    gap = usable_gap(delta)
    return (2 * delta / (gap - 2 * delta)) ** 2


def wall_guess(n: int, delta: Fraction = LAYER_DELTA) -> int:
    """``N*`` (at least 3): the least N whose pair bound ``c²/(N − 2)²`` passes the whole-set
    test of n words — ``≤ 1/(n − 1)`` at δ = 1/2 (``N* = 2 + ⌈√(n − 1)⌉``), ``< 1/(n − 1)``
    below (``N* = 3 + ⌊√(c²(n − 1))⌋``; module docstring)."""
    bound = _pair_scale(delta) * max(n - 1, 0)
    if delta == Fraction(1, 2):
        least = math.ceil(bound)  # (N − 2)² ≥ ⌈c²(n − 1)⌉
        root = math.isqrt(least - 1) + 1 if least > 0 else 0
    else:
        root = math.isqrt(math.floor(bound)) + 1  # (N − 2)² > c²(n − 1)
    return max(3, 2 + root)


def wall_rule(delta: Fraction = LAYER_DELTA) -> str:
    """:func:`wall_guess` as a formula in n, for the text and the report."""
    if delta == Fraction(1, 2):
        return "2 + ⌈√(n − 1)⌉"
    scale = _pair_scale(delta)
    return f"3 + ⌊√({scale}(n − 1))⌋" if scale.denominator == 1 else f"3 + ⌊√(({scale})(n − 1))⌋"


def _deltas(deltas: Sequence[Fraction] | None) -> list[Fraction]:
    """The tolerances of a curve (default :data:`LAYER_DELTA`), each once, in the order given."""
    return list(dict.fromkeys(deltas or [LAYER_DELTA]))


def _check_ms(ms: list[int], deltas: list[Fraction]) -> None:
    """Every m even, within the layer family's checks, with a code of two or more words."""
    odd = [m for m in ms if m % 2]
    if odd:
        raise KernelgapError(f"--code layer needs even m (the weight-m/2 layer), got m = {odd[0]}")
    for m in ms:
        check_params(LAYER, {"m": m})
        for delta in deltas:
            if code_size(m, delta) < 2:
                raise KernelgapError(f"the layer code at m = {m} has {code_size(m, delta)} word; a curve needs m ≥ 4")


def _check_builds(grid: dict[tuple[int, Fraction], list[int]]) -> None:
    """Every build (m, δ, N) within the registry's checks and the memory limit (one line otherwise)."""
    for (m, delta), lengths in grid.items():
        for length in lengths:
            check_params(LAYER, {"m": m, "length": length, "distance": layer_distance(delta)})


class LayerCertificates:
    """Certificates of the layer family by (m, N, δ), each computed once (the curves share them)."""

    def __init__(self, log=None):
        self.log = log
        self._done: dict[tuple[int, int, Fraction], tuple] = {}

    def __call__(self, m: int, length: int, delta: Fraction = LAYER_DELTA):
        """The certificate at (m, N, δ)."""
        return self.family_and_certificate(m, length, delta)[1]

    def family_and_certificate(self, m: int, length: int, delta: Fraction = LAYER_DELTA):
        key = (m, length, delta)
        if key not in self._done:
            family = build_family(LAYER, m=m, length=length, distance=layer_distance(delta))
            cert = certify(family, delta, budget_s=LAYER_BUDGET_S)
            if self.log:
                self.log(
                    f"layer m = {m}, N = {length}, δ = {delta}: certified {cert.certified_rank:,} of "
                    f"{cert.queries_total:,} ({cert.seconds:.1f} s)"
                )
            self._done[key] = (family, cert)
        return self._done[key]

    def point(self, m: int, length: int, delta: Fraction = LAYER_DELTA) -> dict:
        """One point of a curve: the certified rank at (m, N, δ) and both bounds behind it."""
        cert = self(m, length, delta)
        return {
            "length": length,
            "certified": cert.certified_rank,
            "trace": cert.trace.rank,
            "radon": cert.radon.rank,
            "method": cert.method,
            "whole_set": cert.radon.whole_set,
            "seconds": round(cert.seconds, 3),
        }


def _layer_common(m: int, n: int, delta: Fraction) -> dict:
    return {
        "delta": str(delta),
        "distance": layer_distance(delta),
        "m": m,
        "n": n,
        "layer_size": math.comb(m, m // 2),
        "positive_construction": 2**m,
        "length_rule": wall_rule(delta),
    }


def length_curve(
    ms: list[int],
    lengths: list[int],
    wall: bool = False,
    certificates: LayerCertificates | None = None,
    log=None,
    deltas: Sequence[Fraction] | None = None,
) -> dict:
    """The certified rank against the context length N at each fixed m and δ (one curve per
    pair), with the code size n, ``C(m, m/2)`` and ``2^m``; ``full_from`` is the least N
    listed that certifies all n words and ``last_short`` the largest N listed below it that
    does not.  With ``wall`` each curve also gets ``N* − 1`` and ``N*`` (:func:`wall_guess`).
    At most :data:`~kernelgap.limits.MAX_CURVE_POINTS` certificates, all checked before the first."""
    deltas = _deltas(deltas)
    count = len(ms) * len(lengths) * len(deltas)
    if count > MAX_CURVE_POINTS:
        raise KernelgapError(
            f"{len(ms):,} values of m times {len(lengths):,} of N"
            + (f" times {len(deltas)} of δ" if len(deltas) > 1 else "")
            + f" give {count:,} points; a curve has at most {MAX_CURVE_POINTS:,}"
        )
    _check_ms(ms, deltas)
    grid = {}
    for delta in deltas:
        for m in ms:
            guess = wall_guess(code_size(m, delta), delta)
            extra = {n for n in (guess - 1, guess) if 3 <= n <= MAX_PRODUCT_LENGTH} if wall else set()
            grid[m, delta] = sorted(set(lengths) | extra)
    _check_builds(grid)
    at = certificates or LayerCertificates(log)
    curves = [_length_curve_at(m, delta, ns, at) for (m, delta), ns in grid.items()]
    return {
        "code": LAYER,
        "against": "length",
        "deltas": [str(d) for d in deltas],
        "lengths": lengths,
        "curves": curves,
    }


def _length_curve_at(m: int, delta: Fraction, lengths: list[int], at: LayerCertificates) -> dict:
    """One curve of :func:`length_curve`: the points at (m, δ), where the whole code is first certified."""
    points = [at.point(m, length, delta) for length in lengths]
    n = at(m, lengths[0], delta).queries_total
    full = [p["length"] for p in points if p["certified"] >= n]
    short = [p for p in points if p["certified"] < n and (not full or p["length"] < full[0])]
    return {
        **_layer_common(m, n, delta),
        "wall_guess": wall_guess(n, delta),
        "points": points,
        "full_from": full[0] if full else None,
        "last_short": {"length": short[-1]["length"], "certified": short[-1]["certified"]} if short else None,
    }


def _smallest_full(full: Callable[[int], bool], guess: int) -> int | None:
    """The least N in ``3..MAX_PRODUCT_LENGTH`` with ``full(N)``, for a monotone ``full``,
    starting at ``guess``: ``full(guess)`` and ``not full(guess − 1)`` settle it in two
    calls; otherwise a doubling walk away from the guess, then bisection."""
    up = not full(guess)  # walk up from a short guess, down from a full one
    edge, step, limit = guess, 1, MAX_PRODUCT_LENGTH if up else 3
    while True:
        if edge == limit:
            return None if up else edge
        cand = min(limit, edge + step) if up else max(limit, edge - step)
        if full(cand) == up:
            break
        edge, step = cand, step * 2
    lo, hi = (edge, cand) if up else (cand, edge)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if full(mid) else (mid, hi)
    return hi


def wall_point(m: int, certificates: LayerCertificates, delta: Fraction = LAYER_DELTA) -> dict:
    """At (m, δ): the smallest N whose certificate reaches every one of the n code words, found
    from :func:`wall_guess` and checked by the certificates at N (all n) and N − 1 (fewer);
    the rank there, its share ``r/2^m`` and ``log2 r / m`` beside the ceiling of every pair
    certificate (:func:`~.ceiling.certificate_ceiling`) and the middle layer's ``√(2/(πm))`` (``C(m, m/2)/2^m``
    to first order), and the query one-hot construction checked there."""
    n = code_size(m, delta)
    guess = wall_guess(n, delta)
    tried: list[int] = []

    def full(length: int) -> bool:
        tried.append(length)
        cert = certificates(m, length, delta)
        return cert.certified_rank >= cert.queries_total

    length = _smallest_full(full, guess)
    top = length if length is not None else max(tried)
    family, cert = certificates.family_and_certificate(m, top, delta)
    below = length - 1 if length is not None and length > 3 else None
    return {
        **_layer_common(m, cert.queries_total, delta),
        "predicted_length": guess,
        "length": length,
        "certified": cert.certified_rank,
        "method": cert.method,
        "below_length": below,
        "certified_below": certificates(m, below, delta).certified_rank if below is not None else None,
        "formula_holds": length == guess,
        **_ratios(m, cert.certified_rank, delta, top),
        **_construction(family, cert.certified_rank, delta),
        "tried": [{"length": t, "certified": certificates(m, t, delta).certified_rank} for t in sorted(set(tried))],
    }


def _ratios(m: int, rank: int, delta: Fraction, length: int) -> dict:
    """How close a rank r at m gets to ``2^m``, beside ``C(m, m/2)`` and the pair ceiling."""
    ceiling = certificate_ceiling(m, delta, length)
    return {
        "log2_rank_per_m": math.log2(rank) / m,
        "log2_layer_per_m": math.log2(math.comb(m, m // 2)) / m,
        "ratio_to_positive": rank / 2**m,
        "layer_ratio": math.comb(m, m // 2) / 2**m,
        "layer_asymptote": math.sqrt(2 / (math.pi * m)),
        "ceiling": ceiling,
        "ceiling_gap": usable_gap(delta),
        "ceiling_ratio": ceiling / 2**m,
        "log2_ceiling_per_m": math.log2(ceiling) / m,
        "at_ceiling": rank >= ceiling,
    }


def _construction(family, rank: int, delta: Fraction) -> dict:
    """The one-hot constructions on the family (:func:`~.construction.constructed`): the least
    exact rank, its error bound, and whether it equals the certified rank within δ (the
    minimal rank at tolerance δ is then exactly that rank)."""
    built = constructed(family)
    error = built["construction"]["error_bound"] if built["construction"] else None
    rank_built = built["constructed_rank"]
    return {
        "constructed_rank": rank_built,
        "construction_error": error,
        "proved_equals_constructed": None if rank_built is None else rank_built == rank and error < delta,
    }


def wall_curve(
    ms: list[int],
    certificates: LayerCertificates | None = None,
    log=None,
    deltas: Sequence[Fraction] | None = None,
) -> dict:
    """:func:`wall_point` at every (δ, m) (all checked before the first certificate), with the
    least-squares growth of ``log2`` of the certified rank in m per δ."""
    deltas = _deltas(deltas)
    _check_ms(ms, deltas)
    _check_builds({(m, d): [wall_guess(code_size(m, d), d)] for d in deltas for m in ms})
    at = certificates or LayerCertificates(log)
    points = [wall_point(m, at, delta) for delta in deltas for m in ms]
    growth = {str(d): growth_rate([p for p in points if p["delta"] == str(d)]) for d in deltas}
    return {"code": LAYER, "against": "m", "deltas": [str(d) for d in deltas], "points": points, "growth": growth}


def growth_rate(points: list[dict]) -> dict | None:
    """Least-squares fit ``log2(certified) ≈ slope·m + intercept`` over the points."""
    pts = [(p["m"], math.log2(p["certified"])) for p in points if p.get("certified")]
    if len(pts) < 2:
        return None
    slope, intercept = np.polyfit(*zip(*pts), 1)
    return {"log2_per_m": float(slope), "intercept": float(intercept), "points": len(pts)}
