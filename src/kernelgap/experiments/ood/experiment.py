"""OOD scaling: the smallest rank that solves an unseen test pool, per pool size.

The sweep trains ``mlp_exp`` at growing ranks and dense softmax per size; the step
writes ``sizes.json`` (m, sequence counts, share of test answers needing a sharp choice).
"""

from __future__ import annotations

import json
from collections import defaultdict

from ...report.criteria import (
    OOD_SOLVED_ACC,
    edge,
    first_rank,
    run_row,
    solves_test_pool,
    sorted_by,
    test_exact,
)
from ...report.figures import accuracy_axes, band, plt, save, tone
from ...report.html import Finding, fmt, of, reached, table, yes_no
from ...report.trained import RunRow
from ...validation import JsonInt, JsonNumber, Section
from ..base import Experiment, Figure

#: What the paper reports (kept verbatim in summary.json).
PAPER = {"ood": {"transition_ranks": [8, 16, 64]}, "softmax_exact_all_seeds": True}


class OodSoftmax(Section):
    """One softmax run on a scale: train and test verdicts (exact: on the training family and
    the unseen test pool; solved: test accuracy ≥ :data:`OOD_SOLVED_ACC`)."""

    seed: JsonInt
    max_error: JsonNumber | None
    test_max_error: JsonNumber | None
    test_exact_seq_acc: JsonNumber | None
    exact: bool
    train_exact: bool
    solved: bool


class Unfitted(Section):
    """A kernel run that does not fit its training family (train max error ≥ 1/2)."""

    rank: JsonInt
    seed: JsonInt
    train_max_error: JsonNumber | None


class OodScale(Section):
    """One scale of the out-of-distribution experiment: its pools, transitions and runs."""

    label: str
    n: JsonInt | None
    m: JsonInt | None
    train_sequences: JsonInt | None
    test_sequences: JsonInt | None
    test_gap_share: JsonNumber | None
    transition_rank: JsonInt | None
    transition_rank_max_error: JsonInt | None
    transition_rank_fitted: JsonInt | None
    unfitted_runs: list[Unfitted]
    runs: list[RunRow]
    softmax: list[OodSoftmax]


class OodSection(Section):
    """The out-of-distribution experiment's part of ``summary.json``: one entry per scale."""

    scales: list[OodScale]


def section(results) -> dict | None:
    records = results.records("ood")
    if not records:
        return None
    sizes = results.read("ood", "sizes.json") or {}
    by_size = defaultdict(list)
    for rec in records:
        by_size[json.dumps(rec["config"]["family"]["params"], sort_keys=True)].append(run_row(rec))
    scales = [_scale(json.loads(key), sizes.get(key, {}), rows) for key, rows in by_size.items()]
    return OodSection(scales=sorted(scales, key=lambda s: s.n or 0)).dump()


def _scale(params: dict, info: dict, rows: list[dict]) -> OodScale:
    """One pool size: what its step measured (``info``), its transitions and runs."""
    kernel = sorted_by([r for r in rows if r["kind"] == "kernel"], "rank", "seed")
    return OodScale(
        label=info.get("label", f"n={params.get('n')}"),
        n=params.get("n"),
        m=info.get("m"),
        train_sequences=info.get("train_sequences"),
        test_sequences=info.get("test_sequences"),
        test_gap_share=info.get("test_gap_share"),
        transition_rank=first_rank(kernel, solves_test_pool),
        transition_rank_max_error=first_rank(kernel, test_exact),
        transition_rank_fitted=first_rank([r for r in kernel if r["exact"]], solves_test_pool),
        unfitted_runs=[
            Unfitted(rank=r["rank"], seed=r["seed"], train_max_error=r["max_error"]) for r in kernel if not r["exact"]
        ],
        runs=kernel,
        softmax=[
            OodSoftmax(
                seed=r["seed"],
                max_error=r["max_error"],
                test_max_error=r.get("test_max_error"),
                test_exact_seq_acc=r.get("test_exact_seq_acc"),
                exact=bool(r["exact"] and r.get("test_exact", True)),
                train_exact=r["exact"],
                solved=solves_test_pool(r),
            )
            for r in sorted_by([r for r in rows if r["kind"] == "softmax"], "seed")
        ],
    )


def _transition(scale: dict) -> str:
    top = max((r["rank"] for r in scale.get("runs", [])), default=None)
    return reached(scale.get("transition_rank"), top, "r = ")


def _unfitted(scales: list[dict]) -> str:
    """Which runs did not fit their training family: an optimisation failure, not a wall."""
    parts = [
        f"{sc['label']}: " + ", ".join(f"r = {u['rank']} seed {u['seed']}" for u in sc["unfitted_runs"])
        for sc in scales
        if sc.get("unfitted_runs")
    ]
    if not parts:
        return " Every kernel run fits its training family."
    return (
        " Runs that do not fit even their training family (train max error ≥ 1/2; an optimisation "
        "failure, not a capacity wall): " + "; ".join(parts) + "."
    )


def headline(s: dict) -> list[Finding]:
    """The transition rank on unseen tokens per pool size, against the paper's; at the edge
    where the seeds at a transition disagree."""
    scales = s["ood"]["scales"]
    if not scales:
        return []
    ours = " → ".join(_transition(sc) for sc in scales)
    paper = " → ".join(map(str, PAPER["ood"]["transition_ranks"]))
    edges = [
        f"{sc['label']}: {e}"
        for sc in scales
        if sc["transition_rank"] is not None
        and (e := edge([r for r in sc["runs"] if r["rank"] == sc["transition_rank"]], solves_test_pool, "solve"))
    ]
    said = f"On unseen tokens the transition rank goes {ours} as the pool grows (the paper: {paper})."
    return [Finding(said, "; ".join(edges) or None)]


def grows(scales: list[dict]) -> bool:
    """Whether the transition rank never falls as the pool size grows (unreached sizes skipped)."""
    ours = [sc.get("transition_rank") for sc in scales]
    return all(a is None or b is None or b >= a for a, b in zip(ours, ours[1:]))


def conclusions(s: dict) -> dict[str, str]:
    """Per size: the transitions (test accuracy, over fitted runs, test max error), the runs
    that do not fit their training family, softmax's seeds; whether the transition grows."""
    scales = s["ood"].get("scales") or []
    out = {}
    for sc in scales:
        label, runs = sc["label"], sc.get("runs") or []
        top = max((r["rank"] for r in runs), default=None)
        out[f"{label}: transition (test accuracy ≥ {OOD_SOLVED_ACC})"] = _transition(sc)
        out[f"{label}: transition over fitted runs"] = reached(sc.get("transition_rank_fitted"), top, "r = ")
        out[f"{label}: transition (test max error < 1/2)"] = reached(sc.get("transition_rank_max_error"), top, "r = ")
        out[f"{label}: runs not fitting the training family"] = of(len(sc.get("unfitted_runs") or []), len(runs))
        sm = sc.get("softmax") or []
        if sm:
            out[f"{label}: dense softmax train exact / test solved / test exact"] = " / ".join(
                of(sum(bool(r.get(k)) for r in sm), len(sm)) for k in ("train_exact", "solved", "exact")
            )
    if scales:
        out["the transition grows with the pool size"] = yes_no(grows(scales))
    return out


def paper_rows(s: dict) -> list[dict]:
    scales = s["ood"].get("scales") or []
    if not scales:
        return []
    monotone = grows(scales)
    softmax = [r for sc in scales for r in sc.get("softmax", [])]
    sm_all = len(softmax)
    sm_train = sum(1 for r in softmax if r["train_exact"])
    sm_solved = sum(1 for r in softmax if r["solved"])
    sm_ok = sum(1 for r in softmax if r["exact"])
    return [
        {
            "quantity": f"OOD: transition rank per size (majority of seeds with test exact-sequence accuracy "
            f"≥ {OOD_SOLVED_ACC})",
            "paper": " → ".join(map(str, PAPER["ood"]["transition_ranks"])),
            "ours": " → ".join(f"{sc['label']}: {_transition(sc)}" for sc in scales),
            "note": (
                "The transition moves up with the problem size, as in the paper."
                if monotone
                else "The transition does not grow monotonically here; see the OOD figure."
            )
            + " The paper gives no construction for its pools; ours are Hadamard classes with "
            "nuisance bits (every test token unseen), so absolute ranks differ." + _unfitted(scales),
        },
        {
            "quantity": "OOD: dense softmax exact on every size and seed",
            "paper": "yes",
            "ours": f"train exact {sm_train}/{sm_all}; unseen test pool solved {sm_solved}/{sm_all}, "
            f"test max error < 1/2 {sm_ok}/{sm_all}",
            "note": (
                "Agrees, also on the unseen tokens' max error."
                if sm_ok == sm_all
                else "Agrees on the training families and on test accuracy; on unseen tokens the MLP "
                "readout leaves a max error above 1/2 on a few sequences, so the strict reading is "
                "not met on every seed."
                if sm_train == sm_solved == sm_all
                else "Not on every seed: see the OOD runs."
            ),
        },
    ]


def draw(summary: dict, out_dir) -> list[str]:
    """Test exact-sequence accuracy against rank, one curve per problem size."""
    scales = summary["ood"]["scales"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    xs = []
    for k, sc in enumerate(scales):
        color = tone(cmap, k, len(scales))
        xs += band(ax, sc["runs"], "rank", "test_exact_seq_acc", f"{sc['label']} (kernel)", color)
    top = max(xs, default=1) * 2
    for k, sc in enumerate(scales):
        accs = [s["test_exact_seq_acc"] for s in sc.get("softmax", []) if s["test_exact_seq_acc"] is not None]
        if accs:
            ax.scatter(
                [top] * len(accs),
                accs,
                marker="*",
                s=70,
                color=tone(cmap, k, len(scales)),
                label=f"{sc['label']} softmax",
            )
    ax.axhline(OOD_SOLVED_ACC, color="black", ls="--", lw=1, label=f"solved: accuracy ≥ {OOD_SOLVED_ACC}")
    accuracy_axes(
        ax,
        xs + [top],
        "feature rank r (log2)",
        "OOD scaling: disjoint train/test token pools",
        "exact-sequence accuracy on unseen test tokens",
        loc="lower right",
    )
    labels = [t.get_text() for t in ax.get_xticklabels()]
    labels[-1] = "softmax"
    ax.set_xticklabels(labels)
    return save(fig, out_dir, "ood_accuracy_vs_rank")


def sections_html(summary: dict, page) -> dict[str, list[str]]:
    """The OOD figure, and the problem sizes as a table."""
    scales = summary["ood"].get("scales") or []
    rows = [
        {
            "size": sc["label"],
            "train seqs": sc["train_sequences"],
            "test seqs": sc["test_sequences"],
            "gap ≥ 2 share": sc.get("test_gap_share"),
            f"transition (acc ≥ {OOD_SOLVED_ACC})": sc.get("transition_rank"),
            "transition over fitted runs": sc.get("transition_rank_fitted"),
            "transition (max err < 1/2)": sc.get("transition_rank_max_error"),
            "runs not fitting train": len(sc.get("unfitted_runs", [])),
            "softmax test acc": ", ".join(fmt(s.get("test_exact_seq_acc"), ".3f") for s in sc["softmax"]),
            "softmax test max err": ", ".join(fmt(s.get("test_max_error"), ".2f") for s in sc["softmax"]),
        }
        for sc in scales
    ]
    details = (
        [
            "<h2>OOD problem sizes</h2><p>Every test token (query and candidate) is unseen in "
            "training; 'gap ≥ 2 share' is the share of test sequences whose answer needs a choice "
            "between overlaps at least 2 apart.</p>" + table(rows)
        ]
        if rows
        else []
    )
    return {"figures": [page.figures("ood")], "details": details}


EXPERIMENT = Experiment(
    name="ood",
    order=30,
    title="OOD scaling",
    section=section,
    schema=OodSection | None,
    region="figures",
    paper=PAPER,
    paper_rows=paper_rows,
    conclusions=conclusions,
    headline=headline,
    html=sections_html,
    pools=("ood",),
    figures=(
        Figure("ood", draw, "Exact-sequence accuracy on test sequences whose every token is unseen in training."),
    ),
    step=".step:sizes",
    step_reads_sweep=True,
    writes="sizes.json",
)
