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
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import FamilyError, KernelgapError
from ..limits import MAX_CURVE_POINTS, check_memory
from ..task import build_family
from ..task.codes import hadamard_code, hadamard_orders, random_constant_weight
from ..task.family import ProductFamily
from ..task.minip import targets
from ..task.registry import MEMORY, check_values
from ..task.witness import witness_from_code
from .certificate import certify

#: Sequences of a ladder family on which dense softmax's construction is checked.
SOFTMAX_SAMPLES = 4096
#: Default most queries tried per m, per series.
DEFAULT_QUERIES = {"hadamard": 128, "cw": 128, "ladder": 8192}


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
        raise KernelgapError(f"--m must look like 12..96, 12..96..4 or 12,24,48; got {text!r}") from None
    count = len(values) if isinstance(values, list) else _range_length(values)
    if count > MAX_CURVE_POINTS:
        raise KernelgapError(f"--m {text!r} gives {count:,} values of m; a curve has at most {MAX_CURVE_POINTS:,}")
    if not values or min(values) < 2:
        raise KernelgapError(f"--m {text!r} gives no valid m (each m ≥ 2)")
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
    """The curve's numbers for every m that has a family (the rest listed as skipped)."""
    if code not in DEFAULT_QUERIES:
        raise KernelgapError(f"--code must be one of {', '.join(DEFAULT_QUERIES)}, got {code!r}")
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


SERIES: dict[str, Callable] = {code: bound_curve for code in DEFAULT_QUERIES}
