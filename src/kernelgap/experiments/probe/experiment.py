"""Probes: every ``[[probes]]`` module of ``profile.toml`` through ``kernelgap probe``.

Each module trains on the probe's suites beside the built-in ``elu1`` at the same ranks
and seeds (``probe/<name>/``; the baseline runs of equal suites are shared,
``probe/baseline/``).  The same section, figure and HTML make the report of a probe
folder (``kernelgap probe … --out DIR``).
"""

from __future__ import annotations

import copy
import html
import json
from pathlib import Path

from ...errors import ConfigError
from ...io import read_json
from ...report.criteria import (
    OOD_SOLVED_ACC,
    exact,
    first_rank,
    rows_of,
    solves_test_pool,
    sorted_by,
)
from ...report.figures import (
    MODULE_COLOR,
    band,
    error_axes,
    legend,
    log2_axis,
    map_color,
    plt,
    points,
    save,
)
from ...report.html import Page, page, paragraph, table
from ...report.text import reached
from ..base import Experiment, Figure

#: One entry of ``[[probes]]``: a module the probe experiment runs, with its defaults.
PROBE: dict = {
    "name": "",
    "target": "",
    "kwargs": {},
    "interface": None,
    "args": {},
    "output": None,
    "profile": "quick",
    "ranks": {},
    "seeds": [],
    "steps": None,
    "lr": None,
    "requires": None,
}
DEFAULT_PROBES = [{**PROBE, "name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"}]


def parse_probes(entries, path: Path) -> list[dict]:
    """``[[probes]]``: each a module to probe (``name`` and ``target`` required)."""
    if entries is None:
        return copy.deepcopy(DEFAULT_PROBES)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: 'probes' must be an array of tables ([[probes]])")
    out = []
    for k, entry in enumerate(entries):
        unknown = set(entry) - set(PROBE)
        if unknown:
            raise ConfigError(f"{path}: unknown key probes[{k}].{sorted(unknown)[0]}")
        if not entry.get("name") or not entry.get("target"):
            raise ConfigError(f"{path}: probes[{k}] needs a name and a target")
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out


#: ``probe.json``'s fields a report reads, with their JSON types (``None``: may be null);
#: the first three are required.
PROBE_FIELDS: dict[str, tuple] = {
    "target": (str,),
    "runs": (str,),
    "suites": (list,),
    "class": (str, None),
    "kwargs": (dict, None),
    "interface": (str, None),
    "args": (dict, None),
    "output": (int, None),
    "d_model": (int, None),
    "profile": (str, None),
    "source_hash": (str, None),
    "reading": (str, None),
    "parameters": (dict, None),
    "baseline": (str, None),
    "baseline_dir": (str, None),
}
#: The fields of one of its ``suites``; the first three are required.
SUITE_FIELDS: dict[str, tuple] = {
    "name": (str,),
    "family": (str,),
    "params": (dict,),
    "folder": (str, None),
    "baseline_folder": (str, None),
    "test_params": (dict, None),
    "certified_rank": (int, None),
}


def _field_problem(table: dict, fields: dict[str, tuple], required: int, where: str) -> str | None:
    for k, (key, types) in enumerate(fields.items()):
        if key not in table:
            if k < required:
                return f"{where}has no {key!r}"
            continue
        value = table[key]
        ok = (value is None and None in types) or (
            not isinstance(value, bool) and isinstance(value, tuple(t for t in types if t is not None))
        )
        if not ok:
            kinds = " or ".join(
                "null" if t is None else {str: "a string", list: "a list", dict: "an object", int: "an integer"}[t]
                for t in types
            )
            return f"{where}{key!r} must be {kinds}, got {value!r}"
    return None


def read_probe_meta(folder: Path) -> dict | None:
    """``probe.json`` of a probe folder (``None`` when there is none), its shape checked
    against :data:`PROBE_FIELDS` and :data:`SUITE_FIELDS`: anything else is one
    :class:`~kernelgap.errors.ConfigError` naming the file."""
    path = folder / "probe.json"
    if not path.exists():
        return None
    meta = read_json(path)
    if meta is None:
        raise ConfigError(f"{path} is corrupted (not valid JSON); move it aside or rerun `kernelgap probe`")
    if not isinstance(meta, dict):
        why = f"expected a JSON object, got {type(meta).__name__}"
    elif isinstance(meta.get("runs"), list):
        why = "its runs are inside it (a probe of an older kernelgap); rerun `kernelgap probe`"
    else:
        why = _field_problem(meta, PROBE_FIELDS, 3, "")
        for k, suite in enumerate(meta.get("suites") if why is None else []):
            why = (
                f"suites[{k}] must be an object"
                if not isinstance(suite, dict)
                else _field_problem(suite, SUITE_FIELDS, 3, f"suites[{k}] ")
            )
            if why:
                break
    if why:
        raise ConfigError(f"{path} is not a kernelgap probe record: {why}")
    return meta


def probe_section(folder: Path) -> dict | None:
    """A probe folder (``kernelgap probe``, or ``probe/<name>/`` of a reproduction); ``None``
    without a ``probe.json``, an error for one that is not a probe's (:func:`read_probe_meta`)."""
    meta = read_probe_meta(folder)
    if meta is None:
        return None
    suites = []
    baseline = folder / (meta.get("baseline_dir") or "baseline")
    for suite in meta["suites"]:
        sub = suite.get("folder") or suite["name"]
        runs = sorted_by(rows_of(folder / meta["runs"] / sub), "rank", "seed")
        base = sorted_by(rows_of(baseline / (suite.get("baseline_folder") or sub)), "rank", "seed")
        is_ood = suite.get("test_params") is not None
        ok = solves_test_pool if is_ood else exact
        suites.append(
            {
                "name": suite["name"],
                "family": suite["family"],
                "params": suite["params"],
                "ood": is_ood,
                "certified_rank": suite.get("certified_rank"),
                "criterion": f"test exact-sequence accuracy ≥ {OOD_SOLVED_ACC}" if is_ood else "train max error < 1/2",
                "transition_rank": first_rank(runs, ok),
                "max_rank": max((r["rank"] for r in runs), default=None),
                "baseline_transition": first_rank(base, ok),
                "baseline_max_rank": max((r["rank"] for r in base), default=None),
                "fitted_runs": sum(1 for r in runs if r["exact"]),
                "diverged": [
                    {"rank": r["rank"], "seed": r["seed"], "step": r["steps"]}
                    for r in runs
                    if r["status"] == "diverged"
                ],
                "steps": sum(r["steps"] for r in runs),
                "wall_time_s": round(sum(r["wall_time_s"] for r in runs), 1),
                "runs": runs,
                "baseline": base,
            }
        )
    return {
        "name": folder.name,
        **{
            k: meta.get(k)
            for k in (
                "target",
                "class",
                "kwargs",
                "interface",
                "args",
                "output",
                "d_model",
                "profile",
                "source_hash",
                "reading",
                "parameters",
                "baseline",
            )
        },
        "suites": suites,
    }


def probes_section(folder: Path) -> list[dict] | None:
    """Every probe of a reproduction's ``probe/`` folder (one folder each), skipped ones too."""
    if not folder.is_dir():
        return None
    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        skipped = read_json(sub / "skipped.json")
        if isinstance(skipped, dict):
            out.append({"name": sub.name, "target": skipped.get("target"), "skipped": skipped.get("why")})
        elif (section := probe_section(sub)) is not None:
            out.append(section)
    return out or None


def section(results) -> list[dict] | None:
    return probes_section(results.folder("probe"))


SCHEMA = {"type": ["array", "null"], "items": {"type": "object", "required": ["name", "target"]}}


def probe_sentence(pr: dict) -> str:
    if pr.get("skipped"):
        return f"{pr['name']} ({pr['target']}) was not probed: {pr['skipped']}."
    parts = []
    for s in pr["suites"]:
        unit = f"test accuracy ≥ {OOD_SOLVED_ACC}" if s["ood"] else "exact"
        ours = (
            f"from rank {s['transition_rank']}"
            if s["transition_rank"] is not None
            else f"at no rank up to {s['max_rank']} ({s['fitted_runs']} of {len(s['runs'])} runs fit "
            "the training family)"
        )
        base = reached(s["baseline_transition"], s["baseline_max_rank"])
        cert = f"; certified r ≥ {s['certified_rank']}" if s.get("certified_rank") else ""
        div = "".join(f"; diverged at step {d['step']} (rank {d['rank']}, seed {d['seed']})" for d in s["diverged"])
        parts.append(f"{s['name']}: {unit} {ours} (built-in {pr.get('baseline')}: {base}{cert}){div}")
    reading = (
        "the causal final-query reading (position 1 sees only itself)"
        if pr.get("reading") == "final"
        else "the first-query reading"
    )
    label = pr.get("class") if pr.get("name") in (None, "", pr.get("class")) else f"{pr['name']} ({pr.get('class')})"
    return f"Probe of {label} ({pr.get('interface')} interface, {reading}): {'; '.join(parts)}."


def sentence(summary: dict) -> str | None:
    probes = summary.get("probes") or []
    return " ".join(probe_sentence(pr) for pr in probes) or None


def draw(summary: dict, out_dir) -> list[str]:
    """One figure per probed module (``probe-<name>``): its suites beside the built-in baseline."""
    files = []
    for p in summary["probes"]:
        suites = [s for s in p.get("suites", []) if points(s["runs"] + s["baseline"], "rank") >= 2]
        if not suites:
            continue
        fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.8), squeeze=False)
        for ax, s in zip(axes[0], suites):
            key = "test_exact_seq_acc" if s["ood"] else "max_error"
            xs = band(ax, s["runs"], "rank", key, p.get("class") or "probe", MODULE_COLOR)
            xs += band(
                ax, s["baseline"], "rank", key, f"{p.get('baseline')} (built-in)", map_color(summary, p.get("baseline"))
            )
            title = f"{p['name']}: {s['name']}"
            if s["ood"]:
                log2_axis(ax, xs)
                ax.set_ylim(-0.02, 1.02)
                ax.set(xlabel="rank (log2)", ylabel="test exact-seq accuracy", title=title)
                legend(ax)
            else:
                error_axes(ax, xs, s.get("certified_rank"), "rank (log2)", "train max |error|", title)
        files += save(fig, out_dir, f"probe-{p['name']}")
    return files


def probes_html(summary: dict, pg: Page, level: int = 3) -> list[str]:
    """Every probed module: a table beside the built-in baseline, then each on its own — what it
    is, how it was read, its ranks, its runs' steps and time."""
    probes = summary.get("probes") or []
    if not probes:
        return []
    h = f"h{level}"
    zoo = []
    for pr in probes:
        for s in pr.get("suites", []):
            zoo.append(
                {
                    "module": pr["name"],
                    "suite": s["name"],
                    "criterion": s["criterion"],
                    "certified rank": s.get("certified_rank"),
                    "from rank": reached(s["transition_rank"], s["max_rank"]),
                    f"{pr.get('baseline')} (built-in) from": reached(s["baseline_transition"], s["baseline_max_rank"]),
                    "runs fitting train": f"{s['fitted_runs']}/{len(s['runs'])}",
                    "steps": s["steps"],
                    "time s": s["wall_time_s"],
                }
            )
    parts = [table(zoo)] if zoo else []
    for pr in probes:
        parts += [
            f"<{h}>{html.escape(pr['name'])}: <code>{html.escape(str(pr.get('target')))}</code></{h}>",
            paragraph(probe_sentence(pr)),
        ]
        if pr.get("skipped"):
            continue
        counts = pr.get("parameters") or {}
        facts = [
            {
                "kwargs": json.dumps(pr.get("kwargs") or {}),
                "argument map": json.dumps(pr.get("args") or {}) if pr.get("args") else "–",
                "interface": pr.get("interface"),
                "reading": pr.get("reading"),
                "source sha256": (pr.get("source_hash") or "")[:16],
                "parameters (module / kernelgap wrapper)": f"{counts.get('module', '?')} / {counts.get('wrapper', '?')}",
            }
        ]
        runs = [
            {
                "suite": s["name"],
                "model": r["feature_map"],
                "rank": r["rank"],
                "seed": r["seed"],
                "status": r["status"],
                "steps": r["steps"],
                "wall s": r["wall_time_s"],
                "train max err": r["max_error"],
                "test acc": r.get("test_exact_seq_acc"),
            }
            for s in pr["suites"]
            for r in s["runs"] + s["baseline"]
        ]
        parts += [
            table(facts),
            pg.file("probe", f"probe-{pr['name']}.png"),
            "<details><summary>every run (steps and time)</summary>" + table(runs) + "</details>",
        ]
    return [f"<h{level - 1}>Probes</h{level - 1}>", *parts]


PROBE_FIGURE = Figure("probe", draw)


def render_probe_report(summary: dict, out_dir: Path) -> str:
    """``report.html`` of a probe folder (``{"probes": [one]}``)."""
    fig_dir = out_dir / "figures"
    drawn = {}
    if summary.get("probes"):
        files = PROBE_FIGURE.draw(summary, fig_dir)
        if files:
            drawn["probe"] = files
    return page(
        "kernelgap probe",
        [
            f"<h1>kernelgap probe ({html.escape(str(summary.get('profile')))} suites)</h1>",
            *probes_html(summary, Page(summary, drawn, fig_dir)),
        ],
    )


EXPERIMENT = Experiment(
    name="probe",
    title="Probes",
    key="probes",
    section=section,
    schema=SCHEMA,
    sentence=sentence,
    html=lambda summary, pg: {"probes": probes_html(summary, pg)},
    region="probes",
    figures=(PROBE_FIGURE,),
    profile_keys={"probes": parse_probes},
    step=".step:probe_modules",
)
