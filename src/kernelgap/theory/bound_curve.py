"""The certified rank against m for a whole family series (SPEC §4–§6, 'beyond the paper').

For each m a witness family is built from a code and certified twice: with
direct comparisons only and with chains of intermediate candidates (overlap
steps of ``chain_step``) for amplification.  Next to it: the exact positive
construction of SPEC §3.3 (rank ``2^m``: an upper bound for the feature count
nonnegative kernels need on every input) and dense softmax, exact with
``m``-dimensional scores (SPEC §3.2).  Codes, in a registry:

* ``hadamard``: all ``m − 1`` codewords of a normalized Hadamard matrix
  (m with a construction, see :func:`~kernelgap.task.codes.hadamard_orders`);
* ``cw``: a seeded random constant-weight code, weight ``m/2``, pairwise
  overlap ≤ ``3m/8``, at most ``queries`` words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import KernelgapError
from ..io import atomic_write_json
from ..task.codes import hadamard_code, hadamard_orders, random_constant_weight
from ..task.family import Family
from ..task.witness import witness_from_code
from .certificate import certify

CodeSeries = Callable[[int, int], np.ndarray | None]  # (m, queries) -> code or None (no code at m)


def _hadamard_series(m: int, queries: int) -> np.ndarray | None:
    if m % 4 or m not in hadamard_orders(m, m):
        return None
    return hadamard_code(m)[:queries]


def _cw_series(m: int, queries: int) -> np.ndarray | None:
    code = random_constant_weight(m, m // 2, (3 * m) // 8, queries, seed=0, max_tries=20_000,
                                  require_count=False)
    return code if len(code) >= 2 else None


CODE_SERIES: dict[str, CodeSeries] = {"hadamard": _hadamard_series, "cw": _cw_series}


def parse_m_range(text: str) -> list[int]:
    """``"12..96"`` (every m in between), ``"12..96..4"`` (with a step) or ``"12,24,48"``."""
    try:
        if ".." in text:
            parts = [int(p) for p in text.split("..")]
            if len(parts) not in (2, 3):
                raise ValueError
            lo, hi, step = parts[0], parts[1], parts[2] if len(parts) == 3 else 1
            values = list(range(lo, hi + 1, step))
        else:
            values = [int(p) for p in text.split(",") if p]
    except ValueError:
        raise KernelgapError(f"--m must look like 12..96, 12..96..4 or 12,24,48; got {text!r}") from None
    if not values or min(values) < 2:
        raise KernelgapError(f"--m {text!r} gives no valid m (each m ≥ 2)")
    return values


def curve_point(family_of: Callable[[int], Family], m: int) -> dict:
    """Certificates (direct and chained) for one m."""
    direct, chained = certify(family_of(0)), certify(family_of(1))
    return {"m": m, "queries": direct.queries_total, "sequences_direct": direct.sequences,
            "sequences_chained": chained.sequences,
            "certified_direct": direct.certified_rank, "bound_direct": float(direct.bound),
            "certified_chained": chained.certified_rank, "bound_chained": float(chained.bound),
            "positive_construction": 2**m, "softmax_score_dim": m}


def bound_curve(code: str, ms: list[int], queries: int = 128, chain_step: int = 4) -> dict:
    """The curve's numbers for every m that has a code (the rest listed as skipped)."""
    if code not in CODE_SERIES:
        raise KernelgapError(f"--code must be one of {', '.join(CODE_SERIES)}, got {code!r}")
    if queries < 2 or chain_step < 1:
        raise KernelgapError("queries must be ≥ 2 and chain_step ≥ 1")
    points, skipped = [], []
    for m in ms:
        words = CODE_SERIES[code](m, queries)
        if words is None:
            skipped.append(m)
            continue
        points.append(curve_point(
            lambda chained: witness_from_code(words, chain_step=chain_step * chained, name=f"{code}-m{m}"), m))
    if not points:
        raise KernelgapError(f"no m in {ms[0]}..{ms[-1]} has a {code} code")
    return {"code": code, "queries_max": queries, "chain_step": chain_step, "points": points,
            "skipped_m": skipped}


def plot_curve(payload: dict, path: Path) -> Path:
    """The separation picture: certified rank, 2^m and m against m (log2 y axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = payload["points"]
    m = [p["m"] for p in pts]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(m, [p["certified_direct"] for p in pts], "o-", label="certified rank (direct)")
    ax.plot(m, [p["certified_chained"] for p in pts], "s-",
            label=f"certified rank (chains, step {payload['chain_step']})")
    ax.plot(m, [p["queries"] for p in pts], ":", color="grey", label="queries n (trace-bound ceiling)")
    ax.plot(m, [p["positive_construction"] for p in pts], "--", label="positive construction 2^m")
    ax.plot(m, [p["softmax_score_dim"] for p in pts], "-.", label="softmax score dim m")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("m (token bits)")
    ax.set_ylabel("features")
    ax.set_title(f"Certified feature rank vs m ({payload['code']} witness families)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_curve(payload: dict, out_dir: str | Path) -> dict:
    """Write ``bound-curve-<code>.json`` and ``.png`` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    stem = f"bound-curve-{payload['code']}"
    png = plot_curve(payload, out / f"{stem}.png")
    js = atomic_write_json(out / f"{stem}.json", payload)
    return {"json": str(js), "png": str(png)}


def render_curve(payload: dict) -> None:
    print(f"{'m':>4} {'n':>5} {'direct':>7} {'chained':>8} {'softmax d':>10} {'2^m':>22}")
    for p in payload["points"]:
        print(f"{p['m']:>4} {p['queries']:>5} {p['certified_direct']:>7} {p['certified_chained']:>8}"
              f" {p['softmax_score_dim']:>10} {p['positive_construction']:>22}")
    if payload["skipped_m"]:
        print(f"no {payload['code']} code at m = {', '.join(map(str, payload['skipped_m']))}")
    for key in ("json", "png"):
        if key in payload.get("files", {}):
            print(f"wrote {payload['files'][key]}")
