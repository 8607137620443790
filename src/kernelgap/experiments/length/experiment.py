"""Length: one kernel head of rank 1 by sequence length N, constructed and trained.

The step checks the rank-1 construction (α ≡ 1) on every sequence of length 1, 2, 3
over {0,1}^m (``constructed.json``; ``m`` in ``[length]`` of ``profile.toml``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ...errors import KernelgapError
from ...limits import MAX_VERIFY_M, check_verify
from ...report.criteria import at_edge
from ...report.figures import exact_line, legend, plt, save
from ...report.html import Finding, of, yes_no
from ...validation import Int, JsonInt, JsonNumber, Says, Section, json_at_least
from ..base import Experiment, Figure


def _checkable(m: int) -> bool:
    try:
        check_verify(m)
    except KernelgapError:
        return False
    return True


#: The largest m whose rank-1 construction ``verify`` checks on every sequence of length 1, 2, 3
#: (:func:`kernelgap.limits.check_verify`: 9).
MAX_M = max(m for m in range(1, MAX_VERIFY_M + 1) if _checkable(m))
#: ``[length] m``: tokens {0,1}^m whose rank-1 construction is checked on every sequence of length 1, 2, 3.
LengthM = Annotated[
    Int,
    Field(ge=1, le=MAX_M),
    Says(f"must be an m that verify checks at lengths 1, 2, 3 (2^(3m)·9 ≤ 9·2^27 pairs: 1..{MAX_M}), got {{value}}"),
]

#: What the paper reports (kept verbatim in summary.json).
PAPER = {"rank1_exact_up_to_N": 2, "rank1_exact_at_N3": False}


class Constructed(Section):
    """The rank-1 construction at one sequence length, checked on all ``sequences`` over
    {0,1}^m (``constructed.json``)."""

    N: json_at_least(1)
    rank: json_at_least(1)
    m: JsonInt | None = None
    sequences: JsonInt | None = None
    max_error: JsonNumber | None
    exact: bool
    source: Literal["constructed"]


class Trained(Section):
    """One seed trained at rank 1 at one sequence length."""

    N: json_at_least(1)
    rank: json_at_least(1)
    seed: JsonInt
    source: Literal["trained"]
    max_error: JsonNumber | None
    exact: bool


#: One row of the length section: constructed or trained (``source``).
LengthRow = Annotated[Constructed | Trained, Field(discriminator="source")]


def section(results) -> list[dict]:
    rows = [Constructed(**r, source="constructed") for r in (results.read("length", "constructed.json") or [])]
    rows += [
        Trained(
            N=r["params"]["length"],
            rank=r["rank"],
            seed=r["seed"],
            source="trained",
            max_error=r["max_error"],
            exact=r["exact"],
        )
        for r in results.rows("length")
    ]
    return [r.dump() for r in sorted(rows, key=lambda r: (r.source, r.N, getattr(r, "seed", 0)))]


def exact_at(rows: list[dict], n: int, source: str) -> bool | None:
    """Whether every row of ``source`` (constructed or trained) at length ``n`` is exact
    (``None``: none at that length)."""
    hits = [r["exact"] for r in rows if r["N"] == n and r.get("source") == source]
    return all(hits) if hits else None


def agrees(rows: list[dict]) -> bool:
    """The paper's claim, on the construction: rank 1 exact at N = 1, 2 and not at N = 3."""
    return bool(exact_at(rows, 1, "constructed") and exact_at(rows, 2, "constructed")) and (
        exact_at(rows, 3, "constructed") is False
    )


def conclusions(s: dict) -> dict[str, str]:
    """Per source and length N: exact or not (trained: the seeds exact); the paper's claim."""
    rows = s["length"]
    out = {}
    for source in ("constructed", "trained"):
        for n in sorted({r["N"] for r in rows if r.get("source") == source}):
            at = [r for r in rows if r["N"] == n and r.get("source") == source]
            hits = sum(r["exact"] for r in at)
            out[f"rank 1, {source}, N = {n}"] = (
                ("exact" if hits == len(at) else "not exact")
                if source == "constructed"
                else f"{of(hits, len(at))} seeds exact"
            )
    out["rank 1 exact for N ≤ 2, not N = 3 (constructed)"] = yes_no(agrees(rows))
    return out


def headline(s: dict) -> list[Finding]:
    """Rank 1 against the length N on the construction (checked on every sequence): the last N
    where it is exact, the first where it is not; at the edge where trained seeds disagree, with
    each other or with the construction."""
    rows = [r for r in s["length"] if r["rank"] == 1]
    built = {r["N"]: r["exact"] for r in rows if r.get("source") == "constructed"}
    fails = [n for n, ok in built.items() if not ok]
    if not fails:
        return []
    first = min(fails)
    ok = [n for n in built if n < first]
    said = f"Rank 1 is exact up to N = {max(ok)} and fails at N = {first}." if ok else f"Rank 1 fails at N = {first}."
    edges = []
    for n in sorted({r["N"] for r in rows if r.get("source") == "trained"}):
        seeds = [r for r in rows if r.get("source") == "trained" and r["N"] == n]
        hits = sum(r["exact"] for r in seeds)
        if at_edge(hits, len(seeds)) or (n in built and bool(hits) != built[n]):
            edges.append(f"N = {n}: {of(hits, len(seeds))} trained seeds exact")
    return [Finding(said, "; ".join(edges) or None)]


def paper_rows(s: dict) -> list[dict]:
    rows = s["length"]
    parts = []
    for source in ("constructed", "trained"):
        at = {n: exact_at(rows, n, source) for n in (1, 2, 3)}
        cells = [f"N={n}: {'exact' if e else 'not exact'}" for n, e in at.items() if e is not None]
        if cells:
            parts.append(f"{source}: " + ", ".join(cells))
    return [
        {
            "quantity": "Length: rank 1 exact for N ≤ 2, not N = 3",
            "paper": "N ≤ 2 exact, N = 3 not",
            "ours": "; ".join(parts),
            "note": "Agrees." if agrees(rows) else "Differs: see the length figure.",
        }
    ]


def draw(summary: dict, out_dir) -> list[str]:
    """Max error at rank 1 against sequence length, constructed and trained."""
    rows = summary["length"]
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for source, marker, color in (("constructed", "s", "#1f77b4"), ("trained", "o", "#d62728")):
        pts = sorted((r["N"], r["max_error"]) for r in rows if r.get("source") == source)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=f"rank 1, {source}")
    exact_line(ax)
    ax.set_xticks([1, 2, 3])
    ax.set(xlabel="sequence length N", ylabel="max |error|", title="Length transition at rank 1")
    legend(ax)
    return save(fig, out_dir, "length_transition")


EXPERIMENT = Experiment(
    name="length",
    order=40,
    title="Length",
    section=section,
    schema=list[LengthRow],
    region="figures",
    paper={"length": PAPER},
    paper_rows=paper_rows,
    conclusions=conclusions,
    headline=headline,
    settings={"m": 4},
    setting_types={"m": LengthM},
    html=lambda summary, page: {"figures": [page.figures("length")]},
    figures=(
        Figure("length", draw, "Rank-1 kernel attention: max error by sequence length N, constructed and trained."),
    ),
    step=".step:construction",
    writes="constructed.json",
)
