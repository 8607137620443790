"""After the precision sweep: trained models read through a b-bit sketch (``quantized.json``).

For every run of the ``precision`` experiment's sweep the trained model is loaded from
its checkpoint (each stack once; nothing is trained again), checked against its
record (``matches_record``: the loaded model's train max error equals the recorded
one), then scored on its family through :func:`kernelgap.models.sketch.sketch_predict`
with the sketch ``(S, z)`` rounded to each ``b`` of a list.  The collapse point of a
model is the smallest ``b`` from which on every larger ``b`` of the list is still
exact.  Beside it: the transcript bound ``q · log2(s + 1)`` of the family (``q``
matched queries, ``s + 1`` distinct target values) from
:mod:`kernelgap.theory.transcript`, and the sketch's size in bits at collapse.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from ...errors import KernelgapError
from ...io import read_run_records
from ...models.sketch import build_sketch, read_sketch, sketch_numbers
from ...report.integrity import checkpoint_problem
from ...task import Family, error_metrics
from ...theory.transcript import transcript_bound
from ...training import RunConfig
from ...training.trainer import Scored, load_checkpoint
from ..steps import sweep_runs


def sketches(profile, out: Path, sweep_options: dict) -> dict:
    cfg = profile.settings["precision"]
    runs = sweep_runs(profile, "precision")
    return quantized_runs(out, runs, [int(b) for b in cfg["bits"]], list(cfg["quantizers"]))


def family_transcript(family) -> dict:
    """Transcript bound for a family: ``q`` = matched (else distinct) queries, ``s+1`` = target values."""
    pos = family.scored_positions
    targets = family.targets()[:, pos]
    values = len(np.unique(targets))
    queries = len(family.matching) or len(np.unique(family.index[:, pos]))
    return transcript_bound(int(queries), int(max(values, 2)))


def collapse_bits(rows: list[dict]) -> int | None:
    """Smallest ``b`` such that the model is exact at ``b`` and at every larger ``b`` measured."""
    best = None
    for row in sorted(rows, key=lambda r: -r["bits"]):
        if not row["exact"]:
            break
        best = row["bits"]
    return best


def quantized_runs(folder: Path, runs: list[RunConfig], bits: list[int], quantizers: list[str]) -> dict:
    """Load the trained model of every run (its record in ``folder/runs`` names its stack's
    checkpoint; each checkpoint is read once) and score it through quantized sketches."""
    records = {r["id"]: r for r in read_run_records(folder)}
    stacks: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    digests: dict = {}
    for run in runs:
        rec = records.get(run.run_id())
        if rec is None or "checkpoint" not in rec:
            raise KernelgapError(f"{folder}: run {run.run_id()} has no record with a checkpoint; run its sweep first")
        why = checkpoint_problem(folder, rec, digests)  # verified before torch loads it
        if why:
            raise KernelgapError(
                f"{folder / 'runs' / (run.run_id() + '.json')} {why}; `kernelgap sweep {folder}` redoes the run"
            )
        stacks[rec["checkpoint"]["file"]].append((rec["checkpoint"]["member"], rec))
    scored = [_score_stack(folder / file, members, bits, quantizers) for file, members in stacks.items()]
    return {
        "bits": sorted(bits),
        "quantizers": list(quantizers),
        "transcript": family_transcript(scored[0][1]) if scored else None,
        "models": [row for rows, _ in scored for row in rows],
    }


def _score_stack(path: Path, members: list[tuple[int, dict]], bits, quantizers) -> tuple[list[dict], Family]:
    stack, model, family, _ = load_checkpoint(path)
    scored = Scored.of(family, model.dtype)
    with torch.no_grad():
        own = scored.errors(model).abs().amax(dim=(1, 2))  # in the dtype it trained in
    scored, model = Scored.of(family, torch.float64), model.double()
    sketch = build_sketch(model, scored.tokens, scored.index, scored.positions)
    full = read_sketch(sketch)
    grid = {(mode, b): read_sketch(sketch, bits=b, mode=mode) for mode in quantizers for b in bits}
    numbers = sketch_numbers(model)
    out = []
    for e, rec in members:
        run = stack[e]
        ref = error_metrics(full[e], scored.target)
        row = {
            "id": run.run_id(),
            "feature_map": run.model.feature_map,
            "rank": run.model.rank,
            "heads": run.model.heads,
            "seed": run.seed,
            "sketch_numbers": numbers[e],
            "steps": rec["steps"],
            "max_error": ref.max_error,
            "exact": ref.exact,
            "exact_seq_acc": ref.exact_seq_acc,
            "record_max_error": rec["train"]["max_error"],
            "matches_record": _matches(rec, float(own[e])),
            "quantized": [
                _quantized(mode, b, error_metrics(pred[e], scored.target)) for (mode, b), pred in grid.items()
            ],
        }
        row["collapse_bits"] = {
            mode: collapse_bits([q for q in row["quantized"] if q["quantizer"] == mode]) for mode in quantizers
        }
        out.append(row)
    return out, family


def _matches(record: dict, max_error: float) -> bool:
    """Whether the loaded model gives the recorded train max error (the same weights, the
    same dtype: equal up to the order of float sums)."""
    return abs(record["train"]["max_error"] - max_error) <= 1e-6 * max(1.0, abs(max_error))


def _quantized(mode: str, bits: int, met) -> dict:
    max_error = met.max_error if np.isfinite(met.max_error) else None
    return {
        "quantizer": mode,
        "bits": bits,
        "max_error": max_error,
        "exact": met.exact,
        "exact_seq_acc": met.exact_seq_acc,
    }
