"""The exact wall: the least rank of one nonnegative head on the whole cube ``{0,1}^m`` at
long context, per m and tolerance δ (docs/theory.md, "The tropical wall").

A head of rank r exact at every length exists exactly when a min-plus table of rank r orders
every query's candidates (strictly below δ = 1/2; at δ = 1/2 the least rank lies between the
least ``lower`` and ``upper`` ranks).  The step (``wall.json``, :mod:`kernelgap.theory.wall`)
finds the least rank of each order with z3, re-checks the table in integers and scores its
head on every sequence of length 3 and 4; the rank below is refuted by z3 and again by cvc5
on an encoding of its own; the exhaustive pair maximum floors every table (a theorem).  Each
entry therefore carries both sides of its evidence, beside the pair ceiling,
``C(m, ⌊m/2⌋)`` and ``2^m``.  The solvers' budgets count work (z3's rlimit), so the table is
the same on every machine.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated

from pydantic import AfterValidator

from ...args import parse_range
from ...errors import KernelgapError
from ...limits import MAX_WALL_M, WALL_RLIMIT
from ...rationals import parse_delta
from ...report.criteria import grouped
from ...report.figures import legend, plt, save
from ...report.html import of, table
from ...validation import JsonInt, JsonNumber, Section, between, invalid, json_at_least
from ..base import Experiment, Figure

TITLE = "The exact wall on the cube"

#: Largest solver budget per call (z3 rlimit units): about an hour of z3 on one core.
MAX_RLIMIT = 10**11


def _ms(text: str) -> list[int]:
    ms = parse_range(text, "[exact_wall] m", "m", least=2)
    if ms[-1] > MAX_WALL_M:
        raise KernelgapError(f"[exact_wall] m: the wall is computed for m ≤ {MAX_WALL_M}, got {ms[-1]}")
    return ms


def _deltas(text: str) -> list[Fraction]:
    return list(dict.fromkeys(parse_delta(d.strip()) for d in text.split(",")))


def _parsed(parse, text: str):
    """A string ``parse`` reads; where it does not, ``text`` after the setting's name (``{shown}``: its repr)."""

    def check(value: str) -> str:
        try:
            parse(value)
        except KernelgapError:
            raise invalid(text.format(shown=repr(value))) from None
        return value

    return Annotated[str, AfterValidator(check)]


def planned(spec: dict) -> tuple[list[int], list[Fraction], int]:
    """``[exact_wall]``'s m values, tolerances and solver budget per call."""
    return _ms(spec["m"]), _deltas(spec["delta"]), spec["rlimit"]


# -- the summary section ------------------------------------------------------------------


class Score(Section):
    """The head of a table on every sequence of one length."""

    length: json_at_least(3)
    rank: json_at_least(1)
    sequences: json_at_least(1)
    max_error: JsonNumber
    error_bound: str
    exact: bool
    bias: str | None = None
    log_t: JsonNumber | None = None
    within_bound: bool | None = None


class Call(Section):
    """One solver call: the rank asked, the solver's answer and its work."""

    solver: str
    rank: JsonInt
    status: str
    work: JsonInt
    seconds: JsonNumber


class Refuted(Section):
    """A rank refuted: z3's answer, and cvc5's on its own encoding (``None``: not asked)."""

    rank: JsonInt
    z3: str
    cvc5: str | None


class ViaStrict(Section):
    """At δ = 1/2, where the upper search found no table: the strict table standing in."""

    solver: str
    rank: JsonInt
    calls: list[Call]
    scores: list[Score]


class Order(Section):
    """One order's least rank: the table found (``rank``, ``None`` when none was) and the
    least rank its evidence proves (``lower``)."""

    mode: str
    rank: JsonInt | None
    lower: json_at_least(1)
    calls: list[Call]
    solver: str | None = None
    rechecked: bool | None = None
    z3_lower: JsonInt | None = None
    below: Refuted | None = None
    refuted: Refuted | None = None
    scores: list[Score] = []
    via_strict: ViaStrict | None = None


class Entry(Section):
    """One ``(m, δ)``: the least exact rank at long context lies in ``[lower, upper]`` from
    length ``from_length`` on."""

    m: json_at_least(2)
    delta: str
    pair_maximum: JsonInt | None
    pair_ceiling: JsonInt
    middle_binomial: JsonInt
    two_to_m: JsonInt
    tables: dict[str, Order]
    lower: json_at_least(1)
    upper: JsonInt | None
    from_length: json_at_least(3)
    seconds: JsonNumber
    work: JsonInt


class WallSection(Section):
    """The exact wall's part of ``summary.json``: its step's ``wall.json``, one entry per (m, δ)."""

    rlimit: json_at_least(1)
    entries: list[Entry]


def section(results) -> dict | None:
    data = results.read("exact_wall", "wall.json")
    return WallSection(**data).dump() if data else None


# -- what the entries say ------------------------------------------------------------------


def span(e: dict) -> str:
    """``"6"`` where the two ends meet, else ``"[2, 4]"`` (``?``: no table found)."""
    low, high = e["lower"], e["upper"]
    return str(low) if low == high else f"[{low}, {'?' if high is None else high}]"


def _head_order(e: dict) -> str:
    return "strict" if "strict" in e["tables"] else "upper"


def lower_evidence(e: dict) -> str:
    """The pair maximum (a theorem floors every table by it) and each rank refuted by z3, with
    cvc5's answer on its own encoding."""
    order = e["tables"]["strict" if "strict" in e["tables"] else "lower"]
    parts = [f"pair maximum {e['pair_maximum']}"] if e.get("pair_maximum") else []
    for key in ("refuted", "below"):
        b = order.get(key)
        if b and b.get("z3") == "unsat":
            parts.append(f"{order['mode']} rank {b['rank']} refuted (z3 unsat, cvc5 {b.get('cvc5') or 'not asked'})")
    return "; ".join(parts) or "rank 1"


def upper_evidence(e: dict) -> str:
    """The table whose head is exact: its order, rank and solver, and its head's max error on
    every sequence of each scored length."""
    mode = _head_order(e)
    found = e["tables"][mode]
    stand_in = found.get("via_strict") if found.get("rank") is None else None
    if found.get("rank") is None and not stand_in:
        return f"no {mode} table found (solver budget)"
    table = stand_in or found
    scores = ", ".join(f"{s['max_error']:.2g} at N = {s['length']}" for s in table.get("scores") or [])
    exact = all(s["exact"] for s in table.get("scores") or [])
    head = f"head's max error {scores}" + ("" if exact else " (NOT exact)") if scores else "head not scored"
    what = (
        f"no upper table found (solver budget); the strict table of rank {table['rank']} has the upper order"
        if stand_in
        else f"{mode} table of rank {table['rank']}"
    )
    return f"{what} ({table.get('solver', '?')}, re-checked in integers); {head}"


def _head_scores(e: dict) -> list[dict]:
    """The scores of the head behind the entry's upper end (a stand-in strict table's included)."""
    found = e["tables"][_head_order(e)]
    return (found.get("via_strict") or {}).get("scores") or found.get("scores") or []


def closed(e: dict) -> bool:
    return e["upper"] is not None and e["lower"] == e["upper"]


def rows(s: dict) -> list[dict]:
    """One row per entry, a column per piece of evidence."""
    return [
        {
            "m": e["m"],
            "δ": e["delta"],
            "least exact rank": span(e),
            "from N": e["from_length"],
            "lower evidence": lower_evidence(e),
            "upper evidence": upper_evidence(e),
            "pair maximum": e.get("pair_maximum"),
            "pair ceiling": e["pair_ceiling"],
            "C(m, ⌊m/2⌋)": e["middle_binomial"],
            "2^m": e["two_to_m"],
            "seconds": round(e["seconds"], 1),
            "solver work": f"{e['work']:,}",
        }
        for e in s["entries"]
    ]


def _by_delta(entries: list[dict]) -> dict[str, list[dict]]:
    return grouped(sorted(entries, key=lambda e: (Fraction(e["delta"]), e["m"])), lambda e: e["delta"])


def sentence(summary: dict) -> str | None:
    s = summary["exact_wall"]
    if not s["entries"]:
        return None
    parts = []
    for delta, entries in _by_delta(s["entries"]).items():
        at = ", ".join(f"m = {e['m']}: {span(e)}" for e in entries)
        binomial = [e for e in entries if closed(e) and e["lower"] == e["middle_binomial"]]
        tail = (
            f" ({'exactly C(m, ⌊m/2⌋) at every m' if len(binomial) == len(entries) else 'C(m, ⌊m/2⌋) at '}"
            + ("" if len(binomial) == len(entries) else ", ".join(str(e["m"]) for e in binomial) or "no m")
            + ")"
        )
        parts.append(f"at δ = {delta}, {at}" + (tail if Fraction(delta) < Fraction(1, 2) else ""))
    above = [e for e in s["entries"] if e.get("pair_maximum") is not None and e["lower"] > e["pair_maximum"]]
    scored = [e for e in s["entries"] if _head_scores(e)]
    exact = [e for e in scored if all(x["exact"] for x in _head_scores(e))]
    text = (
        "The least rank of one nonnegative head exact at long context on the whole cube {0,1}^m: "
        + "; ".join(parts)
        + ". Each lower end is the exhaustive pair maximum (it floors every table) or a rank refuted by z3 and "
        "again by cvc5 on its own encoding; each upper end a min-plus table re-checked in integers, its head "
        f"exact on every sequence scored in {of(len(exact), len(scored))} entries."
    )
    if above:
        text += " Above every pair certificate: " + ", ".join(
            f"m = {e['m']}, δ = {e['delta']} ({e['lower']} > pair maximum {e['pair_maximum']})" for e in above
        )
        text += "."
    return text


def conclusions(summary: dict) -> dict[str, str]:
    """Per entry: the least exact rank (or its interval) and whether the head was exact."""
    out = {}
    for e in summary["exact_wall"]["entries"]:
        at = f"m = {e['m']}, δ = {e['delta']}"
        out[f"{at}: least exact rank"] = span(e)
        scores = _head_scores(e)
        if scores:
            out[f"{at}: head exact on every scored sequence"] = "yes" if all(x["exact"] for x in scores) else "no"
    return out


def draw(summary: dict, out_dir) -> list[str]:
    """Per tolerance, the least exact rank against m (a bar where only bracketed), beside the
    pair maximum, C(m, ⌊m/2⌋) and 2^m, on a log2 axis."""
    groups = _by_delta(summary["exact_wall"]["entries"])
    if not groups:
        return []
    fig, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 3.9), squeeze=False)
    for ax, (delta, entries) in zip(axes[0], groups.items()):
        ms = [e["m"] for e in entries]
        ax.plot(ms, [e["two_to_m"] for e in entries], "k-.", label="2^m (positive construction)")
        ax.plot(ms, [e["middle_binomial"] for e in entries], "k--", label="C(m, ⌊m/2⌋)")
        pairs = [(e["m"], e["pair_maximum"]) for e in entries if e.get("pair_maximum")]
        if pairs:
            ax.plot(*zip(*pairs), "v:", color="#7f7f7f", label="pair maximum")
        for e in entries:
            top = e["upper"] if e["upper"] is not None else e["two_to_m"]
            if closed(e):
                ax.plot([e["m"]], [e["lower"]], "o", color="#d62728", ms=8, zorder=3)
            else:
                ax.vlines(e["m"], e["lower"], top, color="#d62728", lw=3, ls="-" if e["upper"] else ":", zorder=3)
        ax.plot([], [], "o", color="#d62728", label="least exact rank")
        ax.plot([], [], "-", color="#d62728", lw=3, label="bracketed: [lower, upper]")
        ax.set_yscale("log", base=2)
        ax.set_xticks(ms)
        ax.set(xlabel="m", ylabel="rank r (features)", title=f"δ = {delta}")
        legend(ax)
    return save(fig, out_dir, "exact_wall")


CAPTION = (
    "The least rank of one nonnegative head exact at long context on {0,1}^m against m (log2 scale), one panel "
    "per tolerance: a dot where the lower evidence (pair maximum, a refuted rank) meets a table whose head is "
    "exact, a bar where the two only bracket it (dotted to 2^m: no table found); the exhaustive pair maximum, "
    "C(m, ⌊m/2⌋) and the 2^m features of the positive construction beside it."
)


def markdown_tables(summary: dict) -> list[tuple[str, list[dict], list[str]]]:
    s = summary["exact_wall"]
    return [(TITLE, rows(s), list(rows(s)[0]))] if s["entries"] else []


def section_html(summary: dict, page) -> dict[str, list[str]]:
    return EXPERIMENT.block(summary, page.figures("exact_wall"), table(rows(summary["exact_wall"])))


EXPERIMENT = Experiment(
    name="exact_wall",
    order=65,
    title=TITLE,
    section=section,
    schema=WallSection | None,
    sentence=sentence,
    conclusions=conclusions,
    html=section_html,
    tables=markdown_tables,
    figures=(Figure("exact_wall", draw, CAPTION),),
    settings={"m": "2..4", "delta": "2/5,1/2", "rlimit": WALL_RLIMIT},
    setting_types={
        "m": _parsed(_ms, f" must be m values from 2 to {MAX_WALL_M} like '2..5', got {{shown}}"),
        "delta": _parsed(_deltas, " must be tolerances in (0, 1/2] like '2/5,1/2', got {shown}"),
        "rlimit": between(1, MAX_RLIMIT),
    },
    step=".step:table",
    writes="wall.json",
)
