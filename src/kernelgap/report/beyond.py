"""The "Beyond the paper" section (issue #6): summary sections, figures, HTML.

Reads result folders only (never trains):

* ``signed/``, ``signed_ood/`` (sweeps) → ``summary["loopholes"]["signed"]``;
* ``heads/`` (sweep) → ``summary["loopholes"]["heads"]``;
* ``zoo/``, ``zoo_ood/`` (sweeps) → ``summary["zoo"]``;
* ``precision/quantized.json`` → ``summary["precision"]``;
* ``probe/probe.json`` (+ the baseline sweep in ``probe/runs``) → ``summary["probe"]``.

Beside them the paper's own maps come from ``witness/`` and ``ood/`` when present.
"""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from ..io import read_json, read_run_records
from .common import fmt, html_table, img_tag, majority_rank

EXACT = 0.5
ACC = 0.99


# -- reading ------------------------------------------------------------------------------

def _features(fm: str, rank: int) -> int:
    from ..models import feature_map_class

    try:
        return feature_map_class(fm).output_size(rank)
    except Exception:  # noqa: BLE001 - an unknown map in old results
        return rank


def is_signed(fm: str) -> bool:
    """A registered map whose kernel may be negative (``signed``, ``signed_table``)."""
    from ..models import FEATURE_MAPS

    return fm in FEATURE_MAPS and not FEATURE_MAPS[fm].nonnegative


def _row(rec: dict) -> dict:
    model = rec["config"]["model"]
    fm = model["feature_map"] if model["kind"] == "kernel" else "softmax"
    row = {"id": rec["id"], "feature_map": fm, "rank": model["rank"], "heads": model["heads"],
           "features": _features(fm, model["rank"]) * model["heads"] if fm != "softmax" else None,
           "seed": rec["seed"], "status": rec["status"], "steps": rec["steps"],
           "family": rec["config"]["family"]["name"], "params": rec["config"]["family"]["params"],
           "max_error": rec["train"]["max_error"], "exact": rec["train"]["max_error"] < EXACT,
           "exact_seq_acc": rec["train"]["exact_seq_acc"]}
    if rec.get("test"):
        row.update(test_max_error=rec["test"]["max_error"], test_exact_seq_acc=rec["test"]["exact_seq_acc"])
    row.update(rec["train"].get("kernel") or {})  # sign use of a signed kernel (AttentionModel.kernel_stats)
    return row


def _rows(root: Path, name: str) -> list[dict]:
    return [_row(r) for r in read_run_records(root / name)]


def _unique(rows: list[dict]) -> list[dict]:
    """Rows with distinct run ids (a run in two pooled sweeps counts once, as first listed)."""
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["id"], r)
    return list(out.values())


def transition(rows: list[dict], ok, key: str = "features") -> int | None:
    """Smallest ``key`` value (features by default) at which most seeds satisfy ``ok``."""
    return majority_rank(rows, ok, key)


def _exact(r):
    return r["exact"]


def _acc(r):
    return (r.get("test_exact_seq_acc") or 0.0) >= ACC


def _size_key(row: dict) -> int:
    return int(row["params"].get("n") or 0)


def _certified(root: Path, name: str) -> int | None:
    certs = read_json(root / name / "certificates.json") or {}
    ranks = [c.get("certified_rank") for c in certs.values() if c.get("family") == "witness"]
    if ranks and ranks[0]:
        return ranks[0]
    cert = read_json(root / "witness" / "certificate.json") or {}
    return cert.get("certified_rank")


def _per_map(rows: list[dict], ok, key="features") -> dict:
    maps = sorted({r["feature_map"] for r in rows})
    out = {}
    for fm in maps:
        sub = [r for r in rows if r["feature_map"] == fm]
        out[fm] = {"transition": transition(sub, ok, key), "max_tried": max(r[key] or 0 for r in sub)}
    return out


# -- sections -----------------------------------------------------------------------------

def loopholes_section(root: Path) -> dict | None:
    signed, signed_ood, heads = _rows(root, "signed"), _rows(root, "signed_ood"), _rows(root, "heads")
    if not (signed or signed_ood or heads):
        return None
    # the zoo's runs of every map (signed included) pool with the dedicated sweeps
    zoo_w, zoo_o = _rows(root, "zoo"), _rows(root, "zoo_ood")
    signed = _unique(signed + [r for r in zoo_w if is_signed(r["feature_map"])])
    signed_ood = _unique(signed_ood + [r for r in zoo_o if is_signed(r["feature_map"])])
    nonnegative = lambda r: r["feature_map"] != "softmax" and not is_signed(r["feature_map"])  # noqa: E731
    paper_w = _unique([r for r in _rows(root, "witness") + zoo_w if nonnegative(r)])
    paper_o = _unique([r for r in _rows(root, "ood") + zoo_o if nonnegative(r)])
    cert = _certified(root, "signed") or _certified(root, "heads")
    out: dict = {"certified_rank": cert}
    if signed or paper_w:
        witness_rows = [r for r in signed + paper_w if r["family"] == "witness"]
        out["signed"] = {
            "witness": {"transition": _per_map(witness_rows, _exact),
                        "runs": sorted(signed, key=lambda r: (r["feature_map"], r["rank"], r["seed"])),
                        "nonnegative_runs": [{k: r[k] for k in ("feature_map", "rank", "features", "seed", "max_error")}
                                             for r in paper_w if r["family"] == "witness"]},
            "ood": [],
        }
        for n in sorted({_size_key(r) for r in signed_ood}):
            rows = [r for r in signed_ood + paper_o if _size_key(r) == n]
            out["signed"]["ood"].append({"n": n, "transition_acc99": _per_map(rows, _acc),
                                         "runs": sorted((r for r in signed_ood if _size_key(r) == n),
                                                        key=lambda r: (r["feature_map"], r["rank"], r["seed"]))})
    if heads:
        per_map = {}
        for fm in sorted({r["feature_map"] for r in heads}):
            per_h = {}
            for h in sorted({r["heads"] for r in heads if r["feature_map"] == fm}):
                sub = [r for r in heads if r["feature_map"] == fm and r["heads"] == h]
                per_h[str(h)] = {"transition_total": transition(sub, _exact, "features"),
                                 "max_total": max(r["features"] for r in sub)}
            per_map[fm] = per_h
        out["heads"] = {"per_map": per_map,
                        "runs": sorted(heads, key=lambda r: (r["feature_map"], r["heads"], r["rank"], r["seed"]))}
    return out


def zoo_section(root: Path) -> dict | None:
    wit, ood = _rows(root, "zoo"), _rows(root, "zoo_ood")
    if not (wit or ood):
        return None
    maps = sorted({r["feature_map"] for r in wit + ood})
    table = []
    for fm in maps:
        w = [r for r in wit if r["feature_map"] == fm]
        o = [r for r in ood if r["feature_map"] == fm]
        best = max((r.get("test_exact_seq_acc") or 0.0 for r in o), default=None)
        table.append({"feature_map": fm,
                      "witness_transition": transition(w, _exact) if w else None,
                      "witness_max_features": max((r["features"] for r in w), default=None),
                      "ood_transition_acc99": transition(o, _acc) if o else None,
                      "ood_max_features": max((r["features"] for r in o), default=None),
                      "ood_best_test_acc": best})
    return {"certified_rank": _certified(root, "zoo"),
            "ood_label": f"n={_size_key(ood[0])}" if ood else None,
            "table": table, "witness_runs": wit, "ood_runs": ood}


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
            "not_exact_at_full_precision": [{"feature_map": m["feature_map"], "rank": m["rank"],
                                             "seed": m["seed"], "max_error": m["max_error"]}
                                            for m in models if not m["exact"]]}


def probe_section(root: Path) -> dict | None:
    folder = root / "probe" if (root / "probe").is_dir() else root
    data = read_json(folder / "probe.json")
    if not data:
        return None
    return probe_summary(data, _rows(folder, ""))


def probe_summary(data: dict, baseline: list[dict] | None = None) -> dict:
    suites = []
    for suite in data.get("suites", []):
        runs = [r for r in data["runs"] if r["suite"] == suite["label"]]
        rows = [{"rank": r["rank"], "seed": r["seed"], "max_error": r["train"]["max_error"],
                 "exact": r["train"]["max_error"] < EXACT,
                 "test_exact_seq_acc": (r.get("test") or {}).get("exact_seq_acc")} for r in runs]
        is_ood = suite.get("test_family") is not None
        ok = _acc if is_ood else _exact
        base = []
        for r in baseline or []:
            same = r["family"] == suite["family"]["name"] and (
                not is_ood or r["params"].get("n") == suite["family"]["params"].get("n"))
            if same:
                base.append(r)
        suites.append({"label": suite["label"], "ood": is_ood,
                       "transition_rank": transition(rows, ok, "rank"),
                       "max_rank": max((r["rank"] for r in rows), default=None), "runs": rows,
                       "baseline": {"transition": _per_map(base, ok), "runs": base} if base else None})
    return {"target": data.get("target"), "class": data.get("class"), "kwargs": data.get("kwargs"),
            "interface": data.get("interface"), "profile": data.get("profile"), "suites": suites}


def beyond_sections(root: str | Path) -> dict:
    """``{"loopholes", "zoo", "precision", "probe"}`` for a reproduction folder (None when absent)."""
    root = Path(root)
    return {"loopholes": loopholes_section(root), "zoo": zoo_section(root),
            "precision": precision_section(root), "probe": probe_section(root)}


# -- figures ------------------------------------------------------------------------------

def _plt():
    from . import figures  # sets the Agg backend

    return figures, figures.plt


def _band(ax, rows, xkey, ykey, label, color):
    by = defaultdict(list)
    for r in rows:
        if r.get(ykey) is not None and r.get(xkey):
            by[r[xkey]].append(r[ykey])
    if not by:
        return []
    xs = sorted(by)
    med = [sorted(by[x])[len(by[x]) // 2] for x in xs]
    ax.fill_between(xs, [min(by[x]) for x in xs], [max(by[x]) for x in xs], color=color, alpha=0.15, lw=0)
    ax.plot(xs, med, marker="o", ms=3, color=color, label=label)
    return xs


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _log2(ax, xs):
    figures, _ = _plt()
    if xs:
        figures._log2_rank_axis(ax, xs)


def loopholes_figure(summary: dict, out_dir: Path) -> list[str]:
    figures, plt = _plt()
    sec = summary["loopholes"]
    files = []
    if sec.get("signed"):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        paper = sec["signed"]["witness"].get("nonnegative_runs", [])
        xs = []
        signed = sec["signed"]["witness"]["runs"]
        for fm in sorted({r["feature_map"] for r in signed}):
            xs += _band(ax1, [r for r in signed if r["feature_map"] == fm], "features", "max_error",
                        f"{fm} (signed)", figures.COLORS.get(fm, "black"))
        for fm in sorted({r["feature_map"] for r in paper}):
            xs += _band(ax1, [r for r in paper if r["feature_map"] == fm], "features", "max_error", fm,
                        figures.COLORS.get(fm, "black"))
        ax1.axhline(EXACT, color="black", ls="--", lw=1, label="exact threshold 1/2")
        if sec.get("certified_rank"):
            ax1.axvline(sec["certified_rank"], color="#ff7f0e", ls=":", label=f"certificate r ≥ {sec['certified_rank']}")
        _log2(ax1, xs)
        ax1.set_yscale("log")
        ax1.set(xlabel="features (log2)", ylabel="train max |error|", title="Witness family: signed vs nonnegative")
        _legend(ax1)
        xs = []
        ood_paper = {s["n"]: s["runs"] for s in ((summary.get("ood") or {}).get("scales") or [])}
        cmap = plt.get_cmap("viridis")
        sizes = sec["signed"]["ood"]
        for k, size in enumerate(sizes):
            color = cmap(k / max(1, len(sizes) - 1) * 0.85)
            for fm in sorted({r["feature_map"] for r in size["runs"]}):
                xs += _band(ax2, [r for r in size["runs"] if r["feature_map"] == fm], "rank",
                            "test_exact_seq_acc", f"{fm} n={size['n']}", color)
            base = ood_paper.get(size["n"], [])
            if base:
                by = defaultdict(list)
                for r in base:
                    by[r["rank"]].append(r.get("test_exact_seq_acc") or 0)
                ax2.plot(sorted(by), [sorted(by[x])[len(by[x]) // 2] for x in sorted(by)], ls="--",
                         color=color, label=f"mlp_exp n={size['n']}")
                xs += list(by)
        _log2(ax2, xs)
        ax2.set_ylim(-0.02, 1.02)
        ax2.set(xlabel="feature rank r (log2)", ylabel="test exact-sequence accuracy", title="OOD: signed (solid) vs mlp_exp (dashed)")
        _legend(ax2)
        files += figures._save(fig, out_dir, "beyond_signed")
    if sec.get("heads"):
        maps = list(sec["heads"]["per_map"])
        fig, axes = plt.subplots(1, len(maps), figsize=(5.4 * len(maps), 4.2), squeeze=False)
        cmap = plt.get_cmap("plasma")
        for ax, fm in zip(axes[0], maps):
            runs = [r for r in sec["heads"]["runs"] if r["feature_map"] == fm]
            hs = sorted({r["heads"] for r in runs})
            xs = []
            for k, h in enumerate(hs):
                xs += _band(ax, [r for r in runs if r["heads"] == h], "features", "max_error", f"H = {h}",
                            cmap(k / max(1, len(hs) - 1) * 0.85))
            ax.axhline(EXACT, color="black", ls="--", lw=1, label="exact threshold 1/2")
            if sec.get("certified_rank"):
                ax.axvline(sec["certified_rank"], color="#ff7f0e", ls=":",
                           label=f"1-head certificate r ≥ {sec['certified_rank']}")
            _log2(ax, xs)
            ax.set_yscale("log")
            ax.set(xlabel="total features H·r (log2)", ylabel="train max |error|",
                   title=f"Several heads at fixed total ({fm}, witness)")
            _legend(ax)
        files += figures._save(fig, out_dir, "beyond_heads")
    return files


def zoo_figure(summary: dict, out_dir: Path) -> list[str]:
    figures, plt = _plt()
    z = summary["zoo"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    xs1, xs2 = [], []
    for fm in sorted({r["feature_map"] for r in z["witness_runs"] + z["ood_runs"]}):
        color = figures.COLORS.get(fm, "black")
        xs1 += _band(ax1, [r for r in z["witness_runs"] if r["feature_map"] == fm], "features", "max_error", fm, color)
        xs2 += _band(ax2, [r for r in z["ood_runs"] if r["feature_map"] == fm], "features", "test_exact_seq_acc", fm, color)
    ax1.axhline(EXACT, color="black", ls="--", lw=1)
    if z.get("certified_rank"):
        ax1.axvline(z["certified_rank"], color="#ff7f0e", ls=":", label=f"certificate r ≥ {z['certified_rank']}")
    _log2(ax1, xs1)
    _log2(ax2, xs2)
    ax1.set_yscale("log")
    ax1.set(xlabel="features (log2)", ylabel="train max |error|", title="The zoo on the witness family")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set(xlabel="features (log2)", ylabel="test exact-sequence accuracy", title=f"The zoo on OOD {z.get('ood_label') or ''}")
    _legend(ax1)
    _legend(ax2)
    return figures._save(fig, out_dir, "beyond_zoo")


def precision_figure(summary: dict, out_dir: Path) -> list[str]:
    figures, plt = _plt()
    p = summary["precision"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    keys = sorted({(m["feature_map"], m["rank"]) for m in p["models"]})
    for k, (fm, r) in enumerate(keys):
        for mode, ls in (("uniform", "-"), ("float", "--")):
            rows = [dict(q, rank=r) for m in p["models"] if (m["feature_map"], m["rank"]) == (fm, r)
                    for q in m["quantized"] if q["quantizer"] == mode and q["max_error"] is not None]
            if not rows:
                continue
            by = defaultdict(list)
            for q in rows:
                by[q["bits"]].append(q["max_error"])
            xs = sorted(by)
            ax.plot(xs, [sorted(by[x])[len(by[x]) // 2] for x in xs], ls=ls, marker="o", ms=3,
                    color=cmap(k / max(1, len(keys) - 1) * 0.85), label=f"{fm} r={r} ({mode})")
    ax.axhline(EXACT, color="black", ls="--", lw=1, label="exact threshold 1/2")
    ax.set_yscale("log")
    ax.set(xlabel="bits per sketch number b", ylabel="max |error| (median over seeds)",
           title="Finite-precision sketch on the witness family")
    _legend(ax)
    return figures._save(fig, out_dir, "beyond_precision")


def probe_figure(summary: dict, out_dir: Path) -> list[str]:
    figures, plt = _plt()
    p = summary["probe"]
    suites = p["suites"]
    fig, axes = plt.subplots(1, len(suites), figsize=(5 * len(suites), 3.8), squeeze=False)
    for ax, s in zip(axes[0], suites):
        key = "test_exact_seq_acc" if s["ood"] else "max_error"
        xs = _band(ax, s["runs"], "rank", key, p.get("class") or "probe", "#d62728")
        if s.get("baseline"):
            for fm in sorted({r["feature_map"] for r in s["baseline"]["runs"]}):
                xs += _band(ax, [r for r in s["baseline"]["runs"] if r["feature_map"] == fm], "rank",
                            key if s["ood"] else "max_error", f"{fm} (built-in)", figures.COLORS.get(fm, "black"))
        _log2(ax, xs)
        if s["ood"]:
            ax.set_ylim(-0.02, 1.02)
        else:
            ax.axhline(EXACT, color="black", ls="--", lw=1)
            ax.set_yscale("log")
        ax.set(xlabel="rank (log2)", ylabel="test exact-seq accuracy" if s["ood"] else "train max |error|",
               title=f"probe: {s['label']}")
        _legend(ax)
    return figures._save(fig, out_dir, "beyond_probe")


BEYOND_FIGURES = {"loopholes": loopholes_figure, "zoo": zoo_figure,
                  "precision": precision_figure, "probe": probe_figure}


# -- HTML -----------------------------------------------------------------------------------

def _reached(value, top) -> str:
    if value is not None:
        return str(value)
    return f"not reached up to {top}" if top is not None else "not run"


def _exact_from(value, top, unit="r") -> str:
    return f"exact from {unit} = {value}" if value is not None else f"not exact up to {unit} = {top}"


def _share(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{100 * lo:.0f} %" if round(100 * lo) == round(100 * hi) else f"{100 * lo:.0f}–{100 * hi:.0f} %"


def _sign_use(runs: list[dict]) -> str:
    """What the trained signed kernels did with their signs (runs that recorded it)."""
    parts = []
    for fm in sorted({r["feature_map"] for r in runs}):
        rows = [r for r in runs if r["feature_map"] == fm and "negative_weight_share" in r]
        if not rows:
            continue
        exact = [r for r in rows if r["exact"]]
        use = (f"its exact models give {_share([r['negative_weight_share'] for r in exact])} of the weights a "
               f"negative sign" if exact else
               f"{_share([r['negative_weight_share'] for r in rows])} of its weights are negative")
        parts.append(f"{fm}: {use}, {_share([r['negative_denominator_share'] for r in rows])} of its "
                     f"denominators, smallest |Σα| {min(r['min_abs_denominator'] for r in rows):.2g}, "
                     f"guarded {_share([r['guarded_share'] for r in rows])}")
    return f" At the end of training — {'; '.join(parts)}." if parts else ""


def _bits_by_map(collapse: list[dict]) -> dict[tuple[str, str], list[int]]:
    """Collapse bits of every exact model, per (feature map, quantizer)."""
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for c in collapse:
        out[(c["feature_map"], c["quantizer"])] += [b for b in c["collapse_bits"] if b is not None]
    return dict(sorted(out.items()))


def _span(values: list[int]) -> str:
    if not values:
        return "never exact"
    lo, hi = min(values), max(values)
    return f"{lo} bits" if lo == hi else f"{lo}–{hi} bits"


def sentences(summary: dict) -> dict[str, str]:
    """One sentence per item saying what its numbers show (built from the numbers only)."""
    out = {}
    lo = summary.get("loopholes") or {}
    cert = lo.get("certified_rank")
    if lo.get("signed"):
        t = lo["signed"]["witness"]["transition"]
        signed = ", ".join(f"{fm}: {_exact_from(v['transition'], v['max_tried'])}" for fm, v in t.items() if is_signed(fm))
        others = ", ".join(f"{fm}: {_exact_from(v['transition'], v['max_tried'])}" for fm, v in t.items() if not is_signed(fm))
        out["signed"] = (f"Signed kernels on the witness family — {signed or 'not run'} (features); nonnegative "
                         f"maps — {others or 'not run'}; the certificate (r ≥ {cert}) binds nonnegative kernels only."
                         + _sign_use(lo["signed"]["witness"]["runs"]))
    if lo.get("heads"):
        per_map = lo["heads"]["per_map"]
        parts = "; ".join(f"{fm} — " + ", ".join(f"H = {h}: {_exact_from(v['transition_total'], v['max_total'], 'H·r')}"
                                                for h, v in ph.items()) for fm, ph in per_map.items())
        one = [v["transition_total"] for ph in per_map.values() for h, v in ph.items()
               if h == "1" and v["transition_total"] is not None]
        multi = [v["transition_total"] for ph in per_map.values() for h, v in ph.items()
                 if h != "1" and v["transition_total"] is not None]
        verdict = ""
        if multi and (not one or min(multi) < min(one)):
            verdict = (f" Splitting the budget across heads lowers the total needed (to {min(multi)}"
                       + (f", below the one-head certificate {cert}" if cert and min(multi) < cert else "") + ").")
        elif one:
            verdict = " Splitting the budget across heads does not lower the total needed."
        out["heads"] = f"Several heads at a fixed total on the witness family: {parts}.{verdict}"
    z = summary.get("zoo")
    if z:
        crossed = [r["feature_map"] for r in z["table"] if r["witness_transition"] is not None]
        out["zoo"] = (f"On the witness family {len(crossed)} of {len(z['table'])} maps become exact within the ranks tried "
                      f"({', '.join(crossed) or 'none'}); the table gives the state size (features) each needs, "
                      "and the OOD column whether it carries over to unseen tokens.")
    p = summary.get("precision")
    if p:
        tr = p.get("transcript") or {}
        col = "; ".join(f"{fm}, {q}: {_span(bits)}" for (fm, q), bits in _bits_by_map(p["collapse"]).items())
        sizes = [b for c in p["collapse"] for b in c["sketch_bits_at_collapse"] if b]
        need = tr.get("bits_needed")
        cmp = ""
        if sizes and need:
            cmp = (f" The smallest exact sketch carries {min(sizes)} bits, {min(sizes) / need:.0f}× the transcript "
                   f"bound q·log2(s+1) = {need:.3g} bits (q = {tr.get('answers')}, s + 1 = {tr.get('values')}): "
                   "the bound is far from binding; the features' dynamic range is what costs bits.")
        out["precision"] = (f"Smallest bits per sketch number that keep a trained exact model exact, over its ranks "
                            f"and seeds — {col or 'no exact model'}.{cmp}")
    pr = summary.get("probe")
    if pr:
        parts = "; ".join(f"{s['label']}: {'test accuracy ≥ 0.99' if s['ood'] else 'exact'} "
                          + (f"from rank {s['transition_rank']}" if s["transition_rank"] is not None
                             else f"at no rank up to {s['max_rank']}") for s in pr["suites"])
        out["probe"] = f"Probe of {pr.get('class')} ({pr.get('interface')} interface): {parts}."
    return out


def _beyond_table(rows: list[dict], cols: list[str]) -> str:
    return html_table(rows, cols, cell=lambda v: fmt(v, ".3g"))


def render_beyond(summary: dict, out_dir: Path, figures: dict | None = None) -> str:
    """The "Beyond the paper" HTML section; pops its own entries from ``figures`` (drawn files)."""
    figures = figures if figures is not None else {}
    drawn = {name: figures.pop(name) for name in list(BEYOND_FIGURES) if name in figures}
    for name, fn in BEYOND_FIGURES.items():
        if name not in drawn and summary.get(name):
            drawn[name] = fn(summary, out_dir / "figures")
    if not drawn:
        return ""
    text = sentences(summary)
    fig_dir = out_dir / "figures"

    def figs(name, stem=None):
        return "".join(f"<figure>{img_tag(fig_dir / f)}</figure>" for f in drawn.get(name, [])
                       if f.endswith(".png") and (stem is None or f.startswith(stem)))

    parts = ["<h2>Beyond the paper</h2>",
             "<p>The loopholes the paper leaves open, measured: signed kernels, several heads, the "
             "practical feature maps at the wall, finite precision, and a probe for any attention module.</p>"]
    lo = summary.get("loopholes") or {}
    if lo.get("signed"):
        t = lo["signed"]["witness"]["transition"]
        rows = [{"map": fm, "exact from (features)": _reached(v["transition"], v["max_tried"])} for fm, v in t.items()]
        parts += ["<h3>Signed kernels</h3>", f"<p>{html.escape(text.get('signed', ''))}</p>",
                  _beyond_table(rows + [{"map": "certificate (nonnegative)", "exact from (features)": lo.get("certified_rank")}],
                         ["map", "exact from (features)"])]
        ood_rows = [{"n": s["n"], "map": fm, "test acc ≥ 0.99 from": _reached(v["transition"], v["max_tried"])}
                    for s in lo["signed"]["ood"] for fm, v in s["transition_acc99"].items()]
        if ood_rows:
            parts.append(_beyond_table(ood_rows, ["n", "map", "test acc ≥ 0.99 from"]))
        parts.append(figs("loopholes", "beyond_signed"))
    if lo.get("heads"):
        per_map = lo["heads"]["per_map"]
        hs = sorted({int(h) for ph in per_map.values() for h in ph})
        cols = [f"{fm}: exact from total H·r" for fm in per_map]
        rows = [{"heads H": h, **{f"{fm}: exact from total H·r": _reached(ph[str(h)]["transition_total"], ph[str(h)]["max_total"])
                                  if str(h) in ph else "not run" for fm, ph in per_map.items()}} for h in hs]
        parts += ["<h3>Several heads at a fixed total</h3>", f"<p>{html.escape(text.get('heads', ''))}</p>",
                  _beyond_table(rows, ["heads H", *cols]), figs("loopholes", "beyond_heads")]
    z = summary.get("zoo")
    if z:
        rows = [{"map": r["feature_map"],
                 "witness: exact from (features)": _reached(r["witness_transition"], r["witness_max_features"]),
                 f"OOD {z.get('ood_label') or ''}: acc ≥ 0.99 from": _reached(r["ood_transition_acc99"], r["ood_max_features"]),
                 "OOD best test acc": r["ood_best_test_acc"]} for r in z["table"]]
        parts += ["<h3>The feature-map zoo at the wall</h3>", f"<p>{html.escape(text.get('zoo', ''))}</p>",
                  _beyond_table(rows, list(rows[0]) if rows else []), figs("zoo")]
    p = summary.get("precision")
    if p:
        parts += ["<h3>Finite precision</h3>", f"<p>{html.escape(text.get('precision', ''))}</p>",
                  "<p>Quantizer: symmetric uniform with one scale per sketch tensor (b bits incl. sign), "
                  "or a float with a b-bit significand (see <code>kernelgap.models.sketch</code>).</p>",
                  _beyond_table(p["collapse"], ["feature_map", "rank", "quantizer", "collapse_bits",
                                         "sketch_numbers", "sketch_bits_at_collapse"]), figs("precision")]
    pr = summary.get("probe")
    if pr:
        rows = [{"suite": s["label"], "criterion": "test acc ≥ 0.99" if s["ood"] else "train max error < 1/2",
                 "from rank": _reached(s["transition_rank"], s["max_rank"])} for s in pr["suites"]]
        target = str(pr.get("target"))
        module, _, cls = target.rpartition(":")
        parts += [f"<h3>Probe: <code>{html.escape(f'{Path(module).name}:{cls}' if module else target)}</code></h3>",
                  f"<p>{html.escape(text.get('probe', ''))}</p>",
                  _beyond_table(rows, ["suite", "criterion", "from rank"]), figs("probe")]
    return "\n".join(parts)


def write_probe_report(payload: dict, out: Path, log=print) -> Path:
    """``summary.json``, figures and ``report.html`` for a probe run on its own."""
    from .. import __version__
    from ..io import atomic_write_json, atomic_write_text
    from .html import CSS

    summary = {"version": __version__, "profile": payload.get("profile"), "probe": probe_summary(payload)}
    atomic_write_json(out / "summary.json", summary)
    body = render_beyond(summary, out)
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>kernelgap probe</title>"
            f"<style>{CSS}</style></head><body><h1>kernelgap probe</h1>{body}</body></html>")
    path = atomic_write_text(out / "report.html", page)
    log(f"summary: {out / 'summary.json'}\nreport:  {path}")
    return path
