"""``docs/results.md``: the latest measured numbers, one section per reproduction folder, written
from ``summary.json`` files alone; a second folder of one profile is compared with the first.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import KernelgapError
from ..experiments.probe.table import probes_markdown
from ..experiments.registry import experiments as registered
from ..io import read_json
from .compare import COLUMNS, compare_folders, headline
from .render import comparison_rows, main_findings, markdown_prose, markdown_table, sentences
from .report import is_probe_folder
from .schema import summary_problem

HEADER = """# Measured results

Written by `kernelgap results {folders} --out docs/results.md` from the `summary.json` of
each reproduction folder below: every number on this page comes from those files (the
commands that made them are listed with each). Earlier measurements are in the history of
this file.
"""


def _when(summary: dict) -> str:
    starts = [i["started"] for i in summary.get("invocations") or [] if isinstance(i.get("started"), (int, float))]
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(starts))) if starts else "date not recorded"


def _wall(summary: dict) -> str:
    runs = summary.get("invocations") or []
    total = summary.get("wall_time_s")
    if total is None:
        return "wall time not recorded"
    stopped = sum(1 for i in runs if str(i.get("status", "done")) != "done")
    more = f", {stopped} of them stopped and resumed" if stopped else ""
    return f"{total / 60:.1f} min of wall time over {len(runs)} invocation(s){more}"


def timing_lines(summary: dict) -> list[str]:
    """Where the time went (``summary["timing"]``), the largest first."""
    timing = summary.get("timing")
    if not timing or not timing.get("experiments"):
        return []
    per = sorted(timing["experiments"].items(), key=lambda kv: -(kv[1]["train_s"] + kv[1]["step_s"]))
    columns = ["experiment", "runs", "training (worker s)", "step (s)"]
    rows = [dict(zip(columns, (name, t["runs"], f"{t['train_s']:.0f}", f"{t['step_s']:.0f}"))) for name, t in per]
    return [
        "",
        "### Where the time went",
        "",
        f"The sweeps of every experiment on one pool took {timing['sweeps_s']:.0f} s; then the after-sweep steps, "
        "side by side.",
        "",
        *markdown_table(rows, columns, fit=True),
    ]


def folder_section(folder: Path, summary: dict) -> list[str]:
    lines = [
        f"## {summary.get('profile', '?')} profile ({_when(summary)}, kernelgap {summary.get('version', '?')})",
        "",
        f"From `{folder}/summary.json`: {_wall(summary)}, {_run_on(summary)}.",
    ]
    commands = summary.get("commands") or []
    if commands:
        lines += ["", "Commands: " + "; ".join(f"`{c}`" for c in dict.fromkeys(commands)) + "."]
    found = main_findings(summary)
    if found:
        lines += ["", "### At a glance", ""]
        lines += [f"- {f.text} *({'firm' if f.edge is None else 'at the edge: ' + f.edge})*" for f in found]
    rows = comparison_rows(summary)
    if rows:
        lines += [
            "",
            "### The paper beside ours",
            "",
            *markdown_table(rows, ["quantity", "paper", "ours", "note"], fit=True),
        ]
    lines += timing_lines(summary)
    said = sentences(summary)
    if said:
        titles = {e.name: e.title for e in registered()}
        lines += ["", "### Every experiment"]
        for name, text in said.items():
            lines += ["", *markdown_prose(" ".join(text.split()), f"**{titles.get(name, name)}.** ")]
    for exp in registered():
        if exp.tables is not None and summary.get(exp.summary_key) is not None:
            for title, rows, columns in exp.tables(summary):
                lines += ["", f"### {title}", "", *markdown_table(rows, columns, fit=True)]
    return lines


def results_page(folders: list[str | Path]) -> str:
    """The page of reproduction folders (:func:`results_markdown`), or the table of probe
    folders (:func:`~kernelgap.experiments.probe.table.probes_markdown`); not both at once."""
    probes = [is_probe_folder(Path(f)) for f in folders]
    if folders and all(probes):
        return probes_markdown(folders)
    if any(probes):
        first = next(f for f, p in zip(folders, probes) if p)
        raise KernelgapError(f"{first} is a probe folder: give probe folders alone, or reproduction folders alone")
    return results_markdown(folders)


def results_markdown(folders: list[str | Path]) -> str:
    """The page for these reproduction folders, in the order given."""
    if not folders:
        raise KernelgapError("give at least one reproduction folder (one that holds summary.json)")
    parts = [HEADER.format(folders=" ".join(str(f) for f in folders))]
    first: dict[str, Path] = {}  # the first folder of each profile
    for folder in map(Path, folders):
        summary = read_json(folder / "summary.json")
        if not isinstance(summary, dict):
            raise KernelgapError(f"{folder} holds no readable summary.json; run `kernelgap report {folder}` first")
        why = summary_problem(summary)
        if why is not None:
            raise KernelgapError(
                f"{folder / 'summary.json'} is not a reproduction summary ({why}); "
                f"run `kernelgap report {folder}` to rebuild it"
            )
        profile = summary.get("profile", "?")
        if profile in first:
            parts.append("\n".join(comparison_section(first[profile], folder)))
        else:
            first[profile] = folder
            parts.append("\n".join(folder_section(folder, summary)))
    return "\n\n".join(parts) + "\n"


def _run_on(summary: dict) -> str:
    """``'`avx512` kernels on AMD EPYC (2 cores)'``: what every invocation ran on."""
    runs = summary.get("invocations") or []
    kernels = sorted({i["cpu_capability"] for i in runs if i.get("cpu_capability")})
    named = [i for i in runs if i.get("cpu_model")]
    machines = sorted({f"{i['cpu_model']} ({i['cores']} cores)" if i.get("cores") else i["cpu_model"] for i in named})
    said = f"`{'`, `'.join(kernels)}` kernels" if kernels else "kernels not recorded"
    return f"{said} on {'; '.join(machines)}" if machines else said


def comparison_section(folder_a: Path, folder_b: Path) -> list[str]:
    """A second reproduction of a profile against the first, and every conclusion they differ on."""
    a, b = read_json(folder_a / "summary.json"), read_json(folder_b / "summary.json")
    c = compare_folders(folder_a, folder_b)
    lines = [
        f"## {a.get('profile', '?')} profile again: `{folder_a}` against `{folder_b}`",
        "",
        f"A: `{folder_a}` ({_run_on(a)}, {_wall(a)}). B: `{folder_b}` ({_run_on(b)}, {_when(b)}, {_wall(b)}).",
        f"Commands of B: {'; '.join(f'`{x}`' for x in dict.fromkeys(b.get('commands') or []))}.",
        "",
        f"`kernelgap compare {folder_a} {folder_b}`: {headline(c)}.",
    ]
    if c.differences:
        rows = [
            {"experiment": d.experiment, "conclusion": d.conclusion, "A": d.value_a, "B": d.value_b}
            for d in c.differences
        ]
        lines += ["", *markdown_table(rows, COLUMNS, fit=True)]
    return lines
