"""Finite precision: the smallest bits per sketch number that keep a trained exact model exact.

The step loads the sweep's trained models from their checkpoints (checked against their
records) and reads them
through sketches rounded to each b of ``[precision] bits`` with each quantizer
(``quantized.json``), beside the transcript bound q·log2(s + 1).
"""

from __future__ import annotations

from collections import defaultdict

from ...report.figures import band, exact_line, legend, plt, save, tone
from ...report.html import of, table
from ...validation import JsonInt, JsonNumber, Section
from ..base import Experiment, Figure


class Quantized(Section):
    """One model read through one quantizer at b bits per sketch number."""

    quantizer: str
    bits: JsonInt
    max_error: JsonNumber | None
    exact: bool
    exact_seq_acc: JsonNumber


class PrecisionModel(Section):
    """One trained model the step loaded and quantized (``quantized.json``): at full
    precision, against its record, and at every b; the smallest b keeping it exact."""

    id: str
    feature_map: str
    rank: JsonInt
    heads: JsonInt | None
    seed: JsonInt
    sketch_numbers: JsonInt
    steps: JsonInt
    max_error: JsonNumber
    exact: bool
    exact_seq_acc: JsonNumber
    record_max_error: JsonNumber | None
    matches_record: bool
    quantized: list[Quantized]
    collapse_bits: dict[str, JsonInt | None]


class CollapseRow(Section):
    """Where one map's exact models collapse under one quantizer, seed by seed."""

    feature_map: str
    rank: JsonInt
    quantizer: str
    collapse_bits: list[JsonInt | None]
    sketch_bits_at_collapse: list[JsonInt | None]
    sketch_numbers: JsonInt


class ModelAt(Section):
    """A model named by map, rank and seed (its max error where it was not exact)."""

    feature_map: str
    rank: JsonInt
    seed: JsonInt
    max_error: JsonNumber | None = None


class Transcript(Section):
    """The transcript bound q·log2(s + 1) of the training family: q answers of s + 1 values."""

    answers: JsonInt
    values: JsonInt
    bits_needed: JsonNumber
    bits_needed_ceil: JsonInt


class PrecisionSection(Section):
    """The precision experiment's part of ``summary.json``."""

    bits: list[JsonInt]
    quantizers: list[str]
    transcript: Transcript | None
    collapse: list[CollapseRow]
    models: list[PrecisionModel]
    record_mismatches: list[ModelAt]
    not_exact_at_full_precision: list[ModelAt]


def section(results) -> dict | None:
    data = results.read("precision", "quantized.json")
    if not data:
        return None
    models = data.get("models", [])
    collapse = defaultdict(list)
    for mdl in (m for m in models if m["exact"]):
        for mode, b in mdl["collapse_bits"].items():
            collapse[(mdl["feature_map"], mdl["rank"], mode)].append((b, mdl["sketch_numbers"]))
    return PrecisionSection(
        bits=data.get("bits"),
        quantizers=data.get("quantizers"),
        transcript=data.get("transcript"),
        collapse=[
            CollapseRow(
                feature_map=fm,
                rank=r,
                quantizer=mode,
                collapse_bits=[b for b, _ in cs],
                sketch_bits_at_collapse=[b * numbers if b else None for b, numbers in cs],
                sketch_numbers=cs[0][1],
            )
            for (fm, r, mode), cs in sorted(collapse.items())
        ],
        models=models,
        record_mismatches=[_at(m) for m in models if m.get("matches_record") is False],
        not_exact_at_full_precision=[_at(m, max_error=m["max_error"]) for m in models if not m["exact"]],
    ).dump()


def _at(model: dict, **max_error) -> ModelAt:
    return ModelAt(feature_map=model["feature_map"], rank=model["rank"], seed=model["seed"], **max_error)


def _bits_by_map(collapse: list[dict]) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    for c in collapse:
        out[(c["feature_map"], c["quantizer"])] += [b for b in c["collapse_bits"] if b is not None]
    return dict(sorted(out.items()))


def _span(values: list[int]) -> str:
    if not values:
        return "never exact"
    lo, hi = min(values), max(values)
    return f"{lo} bits" if lo == hi else f"{lo}–{hi} bits"


def sentence(summary: dict) -> str | None:
    p = summary["precision"]
    tr = p.get("transcript") or {}
    col = "; ".join(f"{fm}, {q}: {_span(bits)}" for (fm, q), bits in _bits_by_map(p["collapse"]).items())
    sizes = [b for c in p["collapse"] for b in c["sketch_bits_at_collapse"] if b]
    need = tr.get("bits_needed")
    cmp = ""
    if sizes and need:
        cmp = (
            f" The smallest exact sketch carries {min(sizes)} bits, {min(sizes) / need:.0f}× the transcript "
            f"bound q·log2(s+1) = {need:.3g} bits (q = {tr.get('answers')}, s + 1 = {tr.get('values')})."
        )
    check = ""
    if p.get("record_mismatches"):
        check = f" {len(p['record_mismatches'])} loaded model(s) did not reproduce their sweep record."
    return (
        f"Smallest bits per sketch number that keep a trained exact model exact, over its ranks and "
        f"seeds — {col or 'no exact model'}.{cmp}{check}"
    )


def conclusions(summary: dict) -> dict[str, str]:
    """How many loaded models are exact at full precision and how many did not reproduce their
    record.  The smallest bits that keep a model exact are measurements, as max errors are (a
    trained model a few ulps away on another CPU keeps its exactness at another b), and are
    not compared."""
    p = summary["precision"]
    models = p.get("models") or []
    out = {}
    out["models exact at full precision"] = of(sum(bool(m["exact"]) for m in models), len(models))
    out["models not reproducing their record"] = str(len(p.get("record_mismatches") or []))
    return out


def draw(summary: dict, out_dir) -> list[str]:
    p = summary["precision"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    cmap = plt.get_cmap("viridis")
    keys = sorted({(m["feature_map"], m["rank"]) for m in p["models"]})
    for k, (fm, r) in enumerate(keys):
        for mode, ls in (("uniform", "-"), ("float", "--")):
            rows = [
                q
                for m in p["models"]
                if (m["feature_map"], m["rank"]) == (fm, r)
                for q in m["quantized"]
                if q["quantizer"] == mode
            ]
            band(ax, rows, "bits", "max_error", f"{fm} r={r} ({mode})", tone(cmap, k, len(keys)), ls)
    exact_line(ax)
    ax.set_yscale("log")
    ax.set(
        xlabel="bits per sketch number b",
        ylabel="max |error| (median over seeds)",
        title="Finite-precision sketch on the witness family",
    )
    legend(ax)
    return save(fig, out_dir, "beyond_precision")


def section_html(summary: dict, page) -> dict[str, list[str]]:
    p = summary["precision"]
    return EXPERIMENT.block(
        summary,
        "<p>Quantizer: symmetric uniform with one scale per sketch tensor (b bits incl. sign), "
        "or a float with a b-bit significand.</p>",
        table(
            p["collapse"],
            ["feature_map", "rank", "quantizer", "collapse_bits", "sketch_numbers", "sketch_bits_at_collapse"],
        ),
        page.figures("precision"),
    )


EXPERIMENT = Experiment(
    name="precision",
    order=120,
    title="Finite precision",
    section=section,
    schema=PrecisionSection | None,
    sentence=sentence,
    conclusions=conclusions,
    html=section_html,
    figures=(Figure("precision", draw),),
    settings={"bits": [2, 3, 4, 5, 6, 8, 10, 12, 16], "quantizers": ["uniform"]},
    step=".step:sketches",
    step_reads_sweep=True,
    writes="quantized.json",
)
