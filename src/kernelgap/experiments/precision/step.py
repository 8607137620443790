"""After the precision sweep: trained models read through a b-bit sketch (``quantized.json``).

For every run of a sweep (the ``precision`` experiment) the model is trained
again, deterministically, one stack per process of a local pool (or in this
process), on one thread as the sweep's workers do (``matches_record`` says whether
its max error equals the sweep's record of the same run, as determinism demands),
then scored on
its family through :func:`kernelgap.models.sketch.sketch_predict` with the
sketch ``(S, z)`` rounded to each ``b`` of a list.  The collapse point of a
model is the smallest ``b`` from which on every larger ``b`` of the list is
still exact.  Beside it: the transcript bound ``q · log2(s + 1)`` of the family
(``q`` matched queries, ``s + 1`` distinct target values) from
:mod:`kernelgap.theory.transcript`, and the sketch's size in bits at collapse.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from ...io import read_run_records
from ...models import build_model
from ...models.sketch import build_sketch, read_sketch, sketch_numbers
from ...sweeps.executors import local_executor
from ...task import Family, error_metrics
from ...theory.transcript import transcript_bound
from ...training import DTYPES, RunConfig
from ...training.trainer import Scored, configure_worker, train_stack, vocabulary
from ..steps import local_width, sweep_runs


def sketches(profile, out: Path, sweep_options: dict) -> dict:
    """Retrain the sweep's models and score them through b-bit sketches."""
    cfg = profile.settings["precision"]
    runs = sweep_runs(profile, "precision")
    return quantized_runs(runs, [int(b) for b in cfg["bits"]], list(cfg["quantizers"]), read_records(out),
                          workers=local_width(sweep_options, len(runs)))


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


def quantized_runs(runs: list[RunConfig], bits: list[int], quantizers: list[str],
                   records: dict[str, dict] | None = None, workers: int = 1) -> dict:
    """Train ``runs`` again, stacked as the sweep stacked them (by each record's
    ``stack_rank``), and score every model through quantized sketches; with
    ``workers > 1`` the stacks train side by side in a local process pool."""
    records = records or {}
    groups: dict[tuple, list[RunConfig]] = defaultdict(list)
    for run in runs:
        run = run.resolved()
        padded = (records.get(run.run_id()) or {}).get("stack_rank", run.model.rank)
        groups[run.stack_key(), padded].append(run)
    tasks = [(members, bits, quantizers, records) for members in groups.values()]
    width = min(workers, len(tasks))
    if width > 1:
        with local_executor(width) as pool:
            scored = list(pool.map(_score_group, *zip(*tasks)))
    else:
        scored = [_score_group(*task) for task in tasks]
    return {"bits": sorted(bits), "quantizers": list(quantizers),
            "transcript": scored[0][1] if scored else None,
            "models": [row for rows, _ in scored for row in rows]}


def _score_group(members: list[RunConfig], bits, quantizers, records) -> tuple[list[dict], dict]:
    """One stack's rows and its family's transcript bound, on one thread (as the sweep's workers)."""
    threads = torch.get_num_threads()
    configure_worker()
    try:
        rows, family = _score_stack(members, bits, quantizers, records)
    finally:
        torch.set_num_threads(threads)
    return rows, family_transcript(family)


def _score_stack(members: list[RunConfig], bits, quantizers, records) -> tuple[list[dict], Family]:
    """Train one stack, score it through every quantized sketch; its rows and its family."""
    first = members[0]
    family = first.family.build()
    dtype = DTYPES[first.train.dtype]
    model = build_model(first.model, family.m, family.length, seeds=[r.seed for r in members],
                        ranks=[r.model.rank for r in members],
                        vocabulary=vocabulary(family, None), dtype=dtype)
    results = train_stack(model, family, first.train)
    scored = Scored.of(family, torch.float64)
    model = model.double()
    sketch = build_sketch(model, scored.tokens, scored.index, scored.positions)
    full = read_sketch(sketch)
    grid = {(mode, b): read_sketch(sketch, bits=b, mode=mode) for mode in quantizers for b in bits}
    numbers = sketch_numbers(model)
    out = []
    for e, run in enumerate(members):
        ref = error_metrics(full[e], scored.target)
        rec = records.get(run.run_id())
        row = {"id": run.run_id(), "feature_map": run.model.feature_map, "rank": run.model.rank,
               "heads": run.model.heads, "seed": run.seed, "sketch_numbers": numbers[e],
               "steps": results[e].steps, "max_error": ref.max_error, "exact": ref.exact,
               "exact_seq_acc": ref.exact_seq_acc,
               "record_max_error": rec["train"]["max_error"] if rec else None,
               "matches_record": _matches(rec, results[e].train["max_error"]),
               "quantized": []}
        for (mode, b), pred in grid.items():
            met = error_metrics(pred[e], scored.target)
            row["quantized"].append({"quantizer": mode, "bits": b, "max_error": _finite(met.max_error),
                                     "exact": met.exact, "exact_seq_acc": met.exact_seq_acc})
        row["collapse_bits"] = {mode: collapse_bits([q for q in row["quantized"] if q["quantizer"] == mode])
                                for mode in quantizers}
        out.append(row)
    return out, family


def _matches(record: dict | None, max_error: float) -> bool | None:
    """Whether the retrained model reached the recorded train max error (None without a record)."""
    if record is None:
        return None
    return abs(record["train"]["max_error"] - max_error) <= 1e-6 * max(1.0, abs(max_error))


def _finite(x: float) -> float | None:
    return x if np.isfinite(x) else None


def read_records(sweep_dir: Path) -> dict[str, dict]:
    """The sweep's run records by id."""
    return {r["id"]: r for r in read_run_records(sweep_dir)}
