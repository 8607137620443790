"""The certified rank against m for a whole family series (docs/theory.md, "The wall in m").

Three series, in a registry:

* ``hadamard``: the witness family of all ``m − 1`` codewords of a normalized
  Hadamard matrix (m with a construction, see
  :func:`~kernelgap.task.codes.hadamard_orders`), certified with direct
  comparisons and with chains of intermediate candidates;
* ``cw``: the same for a seeded random constant-weight code (weight ``m/2``,
  pairwise overlap ≤ ``3m/8``, at most ``queries`` words);
* ``ladder``: the ladder product family (:mod:`kernelgap.task.ladder`): per m,
  the largest number of queries certified in full (doubling, then bisection
  to within an eighth), its certificate, and dense softmax's construction
  checked on a random sample of the family's sequences.

Beside them: the exact positive construction (rank ``2^m``, an upper bound on
the features nonnegative kernels need) and dense softmax, exact with
``m``-dimensional scores.

**The layer series** (``layer``; docs/theory.md, "Context length N" and "The layer
family") certifies the layer product family — the n words of the largest
Graham–Sloane class of the weight-m/2 layer, complements as candidates — at
context length N, where gap domination gives ``ρ_N = 2δ/((N − 2)(gap − 2δ))``:

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

import numpy as np

from ..errors import FamilyError, KernelgapError
from ..limits import MAX_CURVE_POINTS, check_memory
from ..task import build_family
from ..task.codes import hadamard_code, hadamard_orders, random_constant_weight
from ..task.family import MAX_PRODUCT_LENGTH, ProductFamily
from ..task.layer import class_sizes
from ..task.minip import targets
from ..task.registry import MEMORY, check_params, check_values
from ..task.witness import witness_from_code
from .certificate import certify

#: Sequences of a ladder family on which dense softmax's construction is checked.
SOFTMAX_SAMPLES = 4096
#: Default most queries tried per m, per series.
DEFAULT_QUERIES = {"hadamard": 128, "cw": 128, "ladder": 8192}
#: The layer series (module docstring): its code is the whole class, so it takes no query budget.
LAYER = "layer"
#: Every series ``--code`` names.
CODES = (*DEFAULT_QUERIES, LAYER)
#: Tolerance of the layer certificates (max error < 1/2: a single step needs gap ≥ 2, the class's distance 4).
LAYER_DELTA = Fraction(1, 2)
#: Seconds of exact clique search per layer certificate: none, the greedy clique and the
#: whole-set test only (sound at any budget; the whole-set test alone decides "all n
#: certified", and at m = 12, N = 3..12 a 10 s exact search certified the same ranks).
LAYER_BUDGET_S = 0.0


def _hadamard_code(m: int, queries: int) -> np.ndarray | None:
    if m % 4 or m not in hadamard_orders(m, m):
        return None
    return hadamard_code(m)[:queries]


def _cw_code(m: int, queries: int) -> np.ndarray | None:
    code = random_constant_weight(m, m // 2, (3 * m) // 8, queries, seed=0, max_tries=20_000, require_count=False)
    return code if len(code) >= 2 else None


def parse_m_range(text: str) -> list[int]:
    """``"12..96"`` (every m in between), ``"12..96..4"`` (with a step) or ``"12,24,48"``;
    more than :data:`~kernelgap.limits.MAX_CURVE_POINTS` values are refused before any
    is listed."""
    return _parse_range(text, "--m", "m", 2, "12..96, 12..96..4 or 12,24,48")


def parse_length_range(text: str) -> list[int]:
    """Context lengths N as for :func:`parse_m_range` (``"3..40"``, ``"3..40..4"``, ``"11,31"``),
    each N ≥ 3 (one query and at least two candidates)."""
    return _parse_range(text, "--length", "N", 3, "3..40, 3..40..4 or 11,31")


def _parse_range(text: str, flag: str, what: str, least: int, shapes: str) -> list[int]:
    try:
        if ".." in text:
            parts = [int(p) for p in text.split("..")]
            if len(parts) not in (2, 3):
                raise ValueError
            lo, hi, step = parts[0], parts[1], parts[2] if len(parts) == 3 else 1
            values: range | list[int] = range(lo, hi + 1, step)
        else:
            values = [int(p) for p in text.split(",") if p]
    except ValueError:
        raise KernelgapError(f"{flag} must look like {shapes}; got {text!r}") from None
    count = len(values) if isinstance(values, list) else _range_length(values)
    if count > MAX_CURVE_POINTS:
        raise KernelgapError(
            f"{flag} {text!r} gives {count:,} values of {what}; a curve has at most {MAX_CURVE_POINTS:,}"
        )
    if not values or min(values) < least:
        raise KernelgapError(f"{flag} {text!r} gives no valid {what} (each {what} ≥ {least})")
    return list(values)


def _range_length(r: range) -> int:
    """``len(r)`` by arithmetic (``len`` overflows past 2^63 values)."""
    span = r.stop - r.start if r.step > 0 else r.start - r.stop
    return max(0, -(-span // abs(r.step)))


def _common(m: int) -> dict:
    return {"m": m, "positive_construction": 2**m, "softmax_score_dim": m}


def code_point(code: str, m: int, queries: int, chain_step: int) -> dict | None:
    """Certificates (direct and chained) of the witness family of a code at m, or None."""
    words = (_hadamard_code if code == "hadamard" else _cw_code)(m, queries)
    if words is None:
        return None
    direct, chained = (
        certify(witness_from_code(words, chain_step=chain_step * k, name=f"{code}-m{m}")) for k in (0, 1)
    )
    return {
        **_common(m),
        "queries": direct.queries_total,
        "sequences_direct": direct.sequences,
        "sequences_chained": chained.sequences,
        "certified_direct": direct.certified_rank,
        "trace_direct": direct.trace.rank,
        "certified_chained": chained.certified_rank,
        "trace_chained": chained.trace.rank,
    }


def softmax_check(family: ProductFamily, samples: int = SOFTMAX_SAMPLES, seed: int = 0) -> dict:
    """Dense softmax's construction (q = −βx, k = z, β = ln 4 + 1) on random sequences of a
    product family: the max error at the query position over ``samples`` draws."""
    import torch

    from ..models.constructions import build_construction

    rng = np.random.default_rng(seed)
    q = rng.choice(family.queries, samples)
    a, b = rng.choice(family.candidates, samples), rng.choice(family.candidates, samples)
    columns = [a, b]
    columns.insert(family.query_position - 1, q)
    dense = torch.from_numpy(family.tokens[np.stack(columns, 1)]).double()
    pos = family.query_position - 1
    model = build_construction("softmax", family.m, 3)
    with torch.no_grad():
        err = (model(dense)[0, :, pos] - targets(dense)[:, pos]).abs()
    return {"sampled": samples, "max_error": float(err.max()), "exact": bool(err.max() < 0.5)}


def _ladder_certificate(m: int, n: int, seed: int):
    """The ladder family of n queries and its certificate; no exact clique search is
    needed to tell whether every query is certified (the full set is checked first)."""
    try:
        family = build_family("ladder", m=m, n=n, seed=seed)
    except FamilyError as exc:  # no code of that size under the overlap cap
        return None, str(exc)
    return family, certify(family, budget_s=0)


def ladder_point(m: int, max_queries: int, seed: int = 0, log=None) -> dict:
    """The largest ladder family at m whose every query is certified (module docstring)."""
    tried, best = [], None

    def attempt(n: int) -> bool:
        nonlocal best
        family, cert = _ladder_certificate(m, n, seed)
        if family is None:
            tried.append({"n": n, "certified": None, "why": cert})
            return False
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
    point = {**_common(m), "tried": tried, "limit_reached": bad is None}
    if best is None:
        return {**point, "queries": None, "certified": None}
    n, family, cert = best
    return {
        **point,
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


def growth_rate(points: list[dict]) -> dict | None:
    """Least-squares fit ``log2(certified) ≈ slope·m + intercept`` over the points."""
    pts = [(p["m"], math.log2(p["certified"])) for p in points if p.get("certified")]
    if len(pts) < 2:
        return None
    slope, intercept = np.polyfit(*zip(*pts), 1)
    return {"log2_per_m": float(slope), "intercept": float(intercept), "points": len(pts)}


def _series_family(code: str, m: int, queries: int, chain_step: int, seed: int) -> tuple[str, dict]:
    """The registered family (name, parameters) whose build matches the largest one of the
    series at m (:func:`code_point`'s chained witness family, or the ladder of ``queries``)."""
    if code == "hadamard":
        return "hadamard", {"m": m, "n": min(queries, m - 1), "chain_step": chain_step}
    if code == "cw":
        return "cw", {"m": m, "weight": m // 2, "max_overlap": (3 * m) // 8, "n": queries, "chain_step": chain_step}
    return "ladder", {"m": m, "n": queries, "seed": seed}


def check_series(code: str, ms: list[int], queries: int, chain_step: int, seed: int) -> None:
    """Before any family is built: every m's parameters pass the registry's type and range
    checks (:func:`~kernelgap.task.registry.check_values`: a bad seed is named) and its
    largest family's memory estimate is within the limit of :mod:`kernelgap.limits`."""
    for m in ms:
        if code == "hadamard" and m % 4:
            continue  # skipped: no Hadamard code
        name, params = _series_family(code, m, queries, chain_step, seed)
        full = check_values(name, params)
        check_memory(f"the {code} family at m = {m:,} with {queries:,} queries", MEMORY[name](**full))


def bound_curve(
    code: str, ms: list[int], queries: int | None = None, chain_step: int = 4, seed: int = 0, log=None
) -> dict:
    """The curve's numbers for every m that has a family (the rest listed as skipped); for
    the layer series, :func:`wall_curve`."""
    if code not in CODES:
        raise KernelgapError(f"--code must be one of {', '.join(CODES)}, got {code!r}")
    if code == LAYER:
        if queries is not None:
            raise KernelgapError("--queries does not apply to --code layer (its code is the whole class)")
        return wall_curve(ms, log=log)
    queries = DEFAULT_QUERIES[code] if queries is None else queries
    if queries < 2 or chain_step < 1:
        raise KernelgapError("queries must be ≥ 2 and chain_step ≥ 1")
    check_series(code, ms, queries, chain_step, seed)
    points, skipped = [], []
    for m in ms:
        point = ladder_point(m, queries, seed, log) if code == "ladder" else code_point(code, m, queries, chain_step)
        if point is None or (code == "ladder" and point["queries"] is None):
            skipped.append(m)
        else:
            points.append(point)
    if not points:
        raise KernelgapError(f"no m in {ms[0]}..{ms[-1]} has a {code} family")
    payload = {"code": code, "queries_max": queries, "points": points, "skipped_m": skipped}
    if code == "ladder":
        payload.update(seed=seed, growth=growth_rate(points))
    else:
        payload["chain_step"] = chain_step
    return payload


def certified_key(payload: dict) -> str:
    """The point field holding the series' certified rank."""
    return "certified" if payload["code"] == "ladder" else "certified_chained"


# -- the layer series at context length N ----------------------------------------------


def code_size(m: int) -> int:
    """n: the words of the layer family's default code at m, the largest Graham–Sloane class
    of the weight-m/2 layer (:func:`~kernelgap.task.layer.class_sizes`, exact)."""
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


def constructed_rank(family, cert) -> int | None:
    """The smallest rank of an exact construction on the family: the certificate JSON's
    ``constructed_rank`` where it records one, else the one-hot constructions checked on the
    family (:mod:`.construction`, where that module is present), else None."""
    payload = cert.to_json(limit=0)
    if "constructed_rank" in payload:
        return payload["constructed_rank"]
    try:
        from .construction import constructed
    except ImportError:
        return None
    return constructed(family)["constructed_rank"]


def _layer_common(m: int, n: int) -> dict:
    return {"m": m, "n": n, "layer_size": math.comb(m, m // 2), "positive_construction": 2**m}


def length_curve(
    code: str,
    ms: list[int],
    lengths: list[int],
    wall: bool = False,
    certificates: LayerCertificates | None = None,
    log=None,
) -> dict:
    """The certified rank against the context length N at each fixed m (one curve per m),
    with the code size n, ``C(m, m/2)`` and ``2^m``; ``full_from`` is the least N listed that
    certifies all n words and ``last_short`` the largest N listed below it that does not.
    With ``wall`` each curve also gets ``N* − 1`` and ``N*`` (:func:`wall_guess`).  At most
    :data:`~kernelgap.limits.MAX_CURVE_POINTS` certificates, all checked before the first."""
    if code != LAYER:
        raise KernelgapError(f"--length applies to --code layer only, got --code {code}")
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
    curves = []
    for m, ns in grid.items():
        points = [at.point(m, length) for length in ns]
        n = at(m, ns[0]).queries_total
        full = [p["length"] for p in points if p["certified"] >= n]
        short = [p for p in points if p["certified"] < n and (not full or p["length"] < full[0])]
        curves.append(
            {
                **_layer_common(m, n),
                "wall_guess": wall_guess(n),
                "points": points,
                "full_from": full[0] if full else None,
                "last_short": {"length": short[-1]["length"], "certified": short[-1]["certified"]} if short else None,
            }
        )
    return {"code": LAYER, "against": "length", "delta": str(LAYER_DELTA), "lengths": lengths, "curves": curves}


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


def layer_lines(payload: dict) -> list[str]:
    """The layer curves as text lines (``kernelgap bound-curve --code layer``)."""
    lines = []
    if payload["against"] == "length":
        for c in payload["curves"]:
            lines.append(
                f"m = {c['m']}: n = {c['n']:,} code words, C(m, m/2) = {c['layer_size']:,}, "
                f"2^m = {c['positive_construction']:,}"
            )
            lines.append(f"{'N':>6} {'certified':>10} {'trace':>8} {'radon':>8}  method")
            lines += [
                f"{p['length']:>6} {p['certified']:>10,} {p['trace']:>8,} {p['radon']:>8,}  {p['method']}"
                for p in c["points"]
            ]
            if c["full_from"] is None:
                lines.append(f"no N listed certifies all {c['n']:,} words (2 + ⌈√(n − 1)⌉ = {c['wall_guess']})")
            else:
                short = c["last_short"]
                lines.append(
                    f"all {c['n']:,} words certified from N = {c['full_from']}"
                    + (f" ({short['certified']:,} at N = {short['length']})" if short else "")
                )
        return lines
    lines.append(
        f"{'m':>4} {'n':>10} {'N*':>6} {'certified':>10} {'at N*-1':>10} {'constructed':>12} {'log2 r/m':>9} "
        f"{'C(m,m/2)':>14} {'2^m':>16}"
    )
    for p in payload["points"]:
        at = str(p["length"]) if p["length"] is not None else "-"
        below = f"{p['certified_below']:,}" if p["certified_below"] is not None else "-"
        built = f"{p['constructed_rank']:,}" if p["constructed_rank"] is not None else "-"
        lines.append(
            f"{p['m']:>4} {p['n']:>10,} {at:>6} {p['certified']:>10,} {below:>10} {built:>12} "
            f"{p['log2_rank_per_m']:>9.3f} {p['layer_size']:>14,} {p['positive_construction']:>16,}"
        )
    off = [p for p in payload["points"] if not p["formula_holds"]]
    lines.append(
        "N* = 2 + ⌈√(n − 1)⌉ is the smallest N certifying all n words at every m (checked at N* and N* − 1)"
        if not off
        else "N* = 2 + ⌈√(n − 1)⌉ is NOT the smallest N at m = "
        + ", ".join(f"{p['m']} (guess {p['predicted_length']}, found {p['length']})" for p in off)
    )
    return lines


SERIES: dict[str, Callable] = {code: bound_curve for code in CODES}
