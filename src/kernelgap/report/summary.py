"""``summary.json``: every number of a reproduction, read from its result files.

A reproduction folder holds one sweep folder per experiment with
``runs/<id>.json`` records, plus the files the after-sweep steps wrote
(``witness/certificate.json``, ``ood/sizes.json``, ``length/constructed.json``,
``*/certificates.json``, ``precision/quantized.json``, ``probe/``,
``bound_curve/curve.json``).  This module only reads them.  Schema:
``summary.schema.json`` beside it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .. import __version__
from ..errors import KernelgapError
from ..io import read_json, read_run_records
from .criteria import (
    OOD_SOLVED_ACC, every, exact, first_rank, rows_of, run_row, solves_test_pool, test_exact, unique,
)

#: Schema version of summary.json (bump on incompatible changes).
SCHEMA_VERSION = 3

#: What the paper reports.  Kept verbatim in summary.json.
PAPER = {
    "witness": {"inputs": 1272, "m": 24, "certified_rank": 8,
                "error_below_bound": "> 0.80 for r < 8", "exact_rank": 32},
    "ood": {"transition_ranks": [8, 16, 64]},
    "softmax_exact_all_seeds": True,
    "length": {"rank1_exact_up_to_N": 2, "rank1_exact_at_N3": False},
}
#: Sweeps whose runs train on the witness family (pooled for one "exact from" per map).
WITNESS_SWEEPS = ("witness", "signed", "heads", "zoo")
#: Sweeps whose runs train on OOD pools (pooled per size).
OOD_SWEEPS = ("ood", "signed_ood", "zoo_ood")


def _size(row: dict) -> int:
    return int(row["params"].get("n") or 0)


def _per_map(rows: list[dict], ok, key: str = "features") -> dict:
    """Per feature map: the smallest ``key`` at which most seeds satisfy ``ok``, and the largest tried."""
    return {fm: {"transition": first_rank([r for r in rows if r["feature_map"] == fm], ok, key),
                 "max_tried": max((r[key] or 0) for r in rows if r["feature_map"] == fm)}
            for fm in sorted({r["feature_map"] for r in rows})}


def pooled_witness_rows(root: Path) -> list[dict]:
    """Every single-head kernel run on the witness family, from every sweep that trained one."""
    rows = [r for name in WITNESS_SWEEPS for r in rows_of(root / name)]
    return unique([r for r in rows if r["family"] == "witness" and r["kind"] == "kernel" and r["heads"] == 1])


def pooled_ood_rows(root: Path) -> list[dict]:
    return unique([r for name in OOD_SWEEPS for r in rows_of(root / name) if r["kind"] == "kernel"])


# -- the paper's experiments ------------------------------------------------------------

def witness_section(root: Path, pooled: list[dict]) -> dict | None:
    sweep = root / "witness"
    rows = rows_of(sweep)
    if not rows:
        return None
    cert = read_json(sweep / "certificate.json") or {}
    kernel = sorted((r for r in rows if r["kind"] == "kernel"), key=lambda r: (r["feature_map"], r["rank"], r["seed"]))
    softmax = sorted((r for r in rows if r["kind"] == "softmax"), key=lambda r: r["seed"])
    maps = sorted({r["feature_map"] for r in kernel})
    certified = cert.get("certified_rank")
    below = [r["max_error"] for r in pooled if certified and (r["features"] or 0) < certified
             and not r["signed"] and r["max_error"] is not None]
    return {
        "m": cert.get("m"), "sequences": cert.get("sequences"),
        "certified_rank": certified, "certificate": cert, "constructed": cert.get("constructed"),
        "runs": kernel,
        "softmax": [{"seed": r["seed"], "max_error": r["max_error"], "exact": r["exact"]} for r in softmax],
        "transition_rank": {fm: first_rank([r for r in pooled if r["feature_map"] == fm], exact, "features")
                            for fm in maps},
        "exact_all_seeds_rank": {fm: first_rank([r for r in pooled if r["feature_map"] == fm], exact,
                                                "features", every) for fm in maps},
        "below_certificate_min_error": min(below, default=None),
    }


def series_section(root: Path) -> list[dict] | None:
    """Per family of the series: certified, constructed and trained smallest exact rank."""
    families = read_json(root / "series" / "series.json")
    if not families:
        return None
    rows = rows_of(root / "series")
    out = []
    for fam in families:
        runs = [r for r in rows if r["params"] == fam["params"]]
        trained = {}
        for fm in sorted({r["feature_map"] for r in runs}):
            mine = [r for r in runs if r["feature_map"] == fm]
            trained[fm] = {"exact_from": first_rank(mine, exact), "seeds": len({r["seed"] for r in mine}),
                           "ranks": sorted({r["rank"] for r in mine}),
                           "runs": _sorted([{k: r[k] for k in ("rank", "seed", "max_error", "exact", "steps")}
                                            for r in mine], "rank", "seed")}
        built = fam["constructed"]
        out.append({"family": fam["family"], "n": fam["n"], "m": fam["m"], "sequences": fam["sequences"],
                    "certified_rank": fam["certified_rank"], "trace_rank": fam["trace_rank"],
                    "constructed_rank": built["rank"], "constructed_exact": built["exact"],
                    "constructed_max_error": built["max_error"], "trained": trained,
                    "exact_below_certificate": [{"feature_map": r["feature_map"], "rank": r["rank"], "seed": r["seed"]}
                                                for r in runs if r["exact"] and r["rank"] < fam["certified_rank"]]})
    return out


def ood_section(root: Path) -> dict | None:
    sweep = root / "ood"
    records = read_run_records(sweep)
    if not records:
        return None
    sizes = read_json(sweep / "sizes.json") or {}
    by_size = defaultdict(list)
    for rec in records:
        by_size[json.dumps(rec["config"]["family"]["params"], sort_keys=True)].append(run_row(rec))
    scales = []
    for key, rows in by_size.items():
        info = sizes.get(key, {})
        kernel = sorted((r for r in rows if r["kind"] == "kernel"), key=lambda r: (r["rank"], r["seed"]))
        softmax = sorted((r for r in rows if r["kind"] == "softmax"), key=lambda r: r["seed"])
        params = json.loads(key)
        fitted = [r for r in kernel if r["exact"]]
        scales.append({
            "label": info.get("label", f"n={params.get('n')}"), "n": params.get("n"),
            "m": info.get("m"), "train_sequences": info.get("train_sequences"),
            "test_sequences": info.get("test_sequences"), "test_gap_share": info.get("test_gap_share"),
            "transition_rank": first_rank(kernel, solves_test_pool),
            "transition_rank_max_error": first_rank(kernel, test_exact),
            "transition_rank_fitted": first_rank(fitted, solves_test_pool),
            "unfitted_runs": [{"rank": r["rank"], "seed": r["seed"], "train_max_error": r["max_error"]}
                              for r in kernel if not r["exact"]],
            "runs": kernel,
            "softmax": [{"seed": r["seed"], "max_error": r["max_error"],
                         "test_max_error": r.get("test_max_error"),
                         "test_exact_seq_acc": r.get("test_exact_seq_acc"),
                         "exact": bool(r["exact"] and r.get("test_exact", True)),
                         "train_exact": r["exact"], "solved": solves_test_pool(r)} for r in softmax],
        })
    scales.sort(key=lambda s: (s["n"] or 0))
    return {"scales": scales}


def length_section(root: Path) -> list[dict]:
    sweep = root / "length"
    rows = [dict(r, source="constructed") for r in (read_json(sweep / "constructed.json") or [])]
    for row in rows_of(sweep):
        rows.append({"N": row["params"]["length"], "rank": row["rank"], "seed": row["seed"],
                     "source": "trained", "max_error": row["max_error"], "exact": row["exact"]})
    return sorted(rows, key=lambda r: (r["source"], r["N"], r.get("seed", 0)))


# -- beyond the paper -------------------------------------------------------------------

def _certified(root: Path) -> int | None:
    cert = read_json(root / "witness" / "certificate.json") or {}
    if cert.get("certified_rank"):
        return cert["certified_rank"]
    for name in ("signed", "heads", "zoo"):
        for entry in (read_json(root / name / "certificates.json") or {}).values():
            if entry.get("family") == "witness" and entry.get("certified_rank"):
                return entry["certified_rank"]
    return None


def _sorted(rows: list[dict], *keys: str) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def loopholes_section(root: Path, pooled: list[dict], pooled_ood: list[dict]) -> dict | None:
    signed_sweeps = rows_of(root / "signed") + rows_of(root / "signed_ood")
    heads = rows_of(root / "heads")
    if not (signed_sweeps or heads):
        return None
    out: dict = {"certified_rank": _certified(root)}
    signed = [r for r in pooled if r["signed"]]
    signed_ood = [r for r in pooled_ood if r["signed"]]
    if signed or signed_ood:
        nonneg_ood = [r for r in pooled_ood if not r["signed"]]
        out["signed"] = {
            "witness": {"transition": _per_map(pooled, exact),
                        "runs": _sorted(signed, "feature_map", "rank", "seed"),
                        "nonnegative_runs": [{k: r[k] for k in ("feature_map", "rank", "features", "seed", "max_error")}
                                             for r in pooled if not r["signed"]]},
            "ood": [{"n": n, "transition_solved": _per_map([r for r in signed_ood + nonneg_ood if _size(r) == n],
                                                            solves_test_pool),
                     "runs": _sorted([r for r in signed_ood if _size(r) == n], "feature_map", "rank", "seed")}
                    for n in sorted({_size(r) for r in signed_ood})],
        }
    if heads:
        per_map = {}
        for fm in sorted({r["feature_map"] for r in heads}):
            per_map[fm] = {str(h): {"transition_total": first_rank(sub, exact, "features"),
                                    "max_total": max(r["features"] for r in sub)}
                           for h in sorted({r["heads"] for r in heads if r["feature_map"] == fm})
                           for sub in [[r for r in heads if r["feature_map"] == fm and r["heads"] == h]]}
        out["heads"] = {"per_map": per_map, "runs": _sorted(heads, "feature_map", "heads", "rank", "seed")}
    return out


def zoo_section(root: Path, pooled: list[dict], pooled_ood: list[dict]) -> dict | None:
    """Every map on the witness family and one OOD size, pooled over every sweep that trained it
    (the zoo sweeps need not repeat the maps other experiments train)."""
    zoo_w, zoo_o = rows_of(root / "zoo"), rows_of(root / "zoo_ood")
    if not (zoo_w or zoo_o):
        return None
    maps = sorted({r["feature_map"] for r in zoo_w + zoo_o + pooled})
    size = _size(zoo_o[0]) if zoo_o else None
    ood = [r for r in pooled_ood if _size(r) == size] if size else []
    table = []
    for fm in maps:
        w = [r for r in pooled if r["feature_map"] == fm]
        o = [r for r in ood if r["feature_map"] == fm]
        row = {"feature_map": fm, "witness_transition": first_rank(w, exact, "features"),
               "witness_max_features": max((r["features"] for r in w), default=None)}
        if ood:
            row.update(ood_transition_solved=first_rank(o, solves_test_pool, "features"),
                       ood_max_features=max((r["features"] for r in o), default=None),
                       ood_best_test_acc=max((r.get("test_exact_seq_acc") or 0.0 for r in o), default=None))
        table.append(row)
    return {"certified_rank": _certified(root), "ood_label": f"n={size}" if size else None,
            "table": table, "witness_runs": [r for r in pooled if r["feature_map"] in maps],
            "ood_runs": [r for r in ood if r["feature_map"] in maps]}


def precision_section(root: Path) -> dict | None:
    data = read_json(root / "precision" / "quantized.json")
    if not data:
        return None
    models = data.get("models", [])
    collapse = defaultdict(list)
    for mdl in models:
        if not mdl["exact"]:
            continue
        for mode, b in mdl["collapse_bits"].items():
            collapse[(mdl["feature_map"], mdl["rank"], mode)].append(
                {"seed": mdl["seed"], "bits": b, "sketch_numbers": mdl["sketch_numbers"],
                 "sketch_bits": b * mdl["sketch_numbers"] if b else None})
    rows = [{"feature_map": fm, "rank": r, "quantizer": mode,
             "collapse_bits": [c["bits"] for c in cs], "sketch_bits_at_collapse": [c["sketch_bits"] for c in cs],
             "sketch_numbers": cs[0]["sketch_numbers"]}
            for (fm, r, mode), cs in sorted(collapse.items())]
    return {"bits": data.get("bits"), "quantizers": data.get("quantizers"),
            "transcript": data.get("transcript"), "collapse": rows, "models": models,
            "record_mismatches": [{"feature_map": m["feature_map"], "rank": m["rank"], "seed": m["seed"]}
                                  for m in models if m.get("matches_record") is False],
            "not_exact_at_full_precision": [{"feature_map": m["feature_map"], "rank": m["rank"],
                                             "seed": m["seed"], "max_error": m["max_error"]}
                                            for m in models if not m["exact"]]}


def probe_section(folder: Path) -> dict | None:
    """A probe folder (``kernelgap probe``, or ``probe/`` of a reproduction)."""
    meta = read_json(folder / "probe.json")
    if not isinstance(meta, dict) or not isinstance(meta.get("runs"), str):
        return None  # no probe, or one of a version that kept its runs inside probe.json
    suites = []
    baseline = folder / meta.get("baseline_dir", "baseline")
    for suite in meta["suites"]:
        sub = suite.get("folder", suite["name"])
        runs = _sorted(rows_of(folder / meta["runs"] / sub), "rank", "seed")
        base = _sorted(rows_of(baseline / suite.get("baseline_folder", sub)), "rank", "seed")
        is_ood = suite.get("test_params") is not None
        ok = solves_test_pool if is_ood else exact
        suites.append({
            "name": suite["name"], "family": suite["family"], "params": suite["params"], "ood": is_ood,
            "certified_rank": suite.get("certified_rank"),
            "criterion": f"test exact-sequence accuracy ≥ {OOD_SOLVED_ACC}" if is_ood else "train max error < 1/2",
            "transition_rank": first_rank(runs, ok), "max_rank": max((r["rank"] for r in runs), default=None),
            "baseline_transition": first_rank(base, ok),
            "baseline_max_rank": max((r["rank"] for r in base), default=None),
            "fitted_runs": sum(1 for r in runs if r["exact"]),
            "diverged": [{"rank": r["rank"], "seed": r["seed"], "step": r["steps"]} for r in runs
                         if r["status"] == "diverged"],
            "steps": sum(r["steps"] for r in runs), "wall_time_s": round(sum(r["wall_time_s"] for r in runs), 1),
            "runs": runs, "baseline": base})
    return {"name": folder.name,
            **{k: meta.get(k) for k in ("target", "class", "kwargs", "interface", "args", "output", "d_model",
                                        "profile", "source_hash", "reading", "parameters", "baseline")},
            "suites": suites}


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


# -- the whole summary ---------------------------------------------------------------------

def invocations(meta: dict) -> list[dict]:
    """Every recorded invocation of a reproduction (folders of older versions list commands only)."""
    return meta.get("invocations") or [{"command": c} for c in meta.get("commands", [])]


def build_summary(root: str | Path, profile: str | None = None) -> dict:
    """Assemble ``summary.json`` for a reproduction folder."""
    root = Path(root)
    if not root.is_dir():
        raise KernelgapError(f"results folder {root} does not exist")
    meta = read_json(root / "reproduce.json") or {}
    pooled, pooled_ood = pooled_witness_rows(root), pooled_ood_rows(root)
    sections = {
        "witness": witness_section(root, pooled),
        "series": series_section(root),
        "ood": ood_section(root),
        "length": length_section(root),
        "bound_curve": read_json(root / "bound_curve" / "curve.json"),
        "loopholes": loopholes_section(root, pooled, pooled_ood),
        "zoo": zoo_section(root, pooled, pooled_ood),
        "precision": precision_section(root),
        "probes": probes_section(root / "probe"),
    }
    if not any(sections.values()):
        raise KernelgapError(f"{root} holds no reproduction results (no experiment folder with runs)")
    runs = invocations(meta)
    times = [i["wall_time_s"] for i in runs if i.get("wall_time_s") is not None]
    return {
        "schema_version": SCHEMA_VERSION,
        "version": __version__,
        "profile": profile or meta.get("profile", "unknown"),
        "commands": [i["command"] for i in runs],
        "invocations": runs,
        "wall_time_s": round(sum(times), 1) if times else None,
        **sections,
        "paper": PAPER,
    }
