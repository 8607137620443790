"""What the after-sweep steps share (they may use torch; only the pipeline loads them).

A step is ``step(profile, out, sweep_options)``: ``out`` is the experiment's results
folder, ``sweep_options`` the reproduction's executor settings.  Each experiment names
its step in its ``experiment.py`` (``Experiment.step``); the report reads what it writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..models.constructions import one_hot_candidates, query_one_hot
from ..sweeps.config import load_sweep
from ..sweeps.executors import available_cores
from ..task.family import MAX_EXPANDED, as_sequences, count_json, sequence_count
from ..task.minip import error_metrics
from ..theory.certificate import certify
from ..theory.construction import constructed_rank, two_heads
from ..theory.two_heads import most_levels


def sweep_runs(profile, experiment: str):
    """The runs of the experiment's sweep file in this profile."""
    return load_sweep(profile.sweep_file(experiment)).runs()


def family_key(spec) -> str:
    """A training family's identity: registered name, parameters and, for a family file, its
    content (SHA-256): two files of one stem and parameters are two families."""
    return json.dumps({"name": spec.name, "params": spec.params, "sha256": spec.sha256}, sort_keys=True)


def distinct_runs(runs):
    """The first run of each distinct training family (:func:`family_key`)."""
    seen = set()
    for run in runs:
        key = family_key(run.family)
        if key not in seen:
            seen.add(key)
            yield run


def distinct_families(runs):
    """``(run, family)`` for each distinct training family, built once as sequences."""
    for run in distinct_runs(runs):
        yield run, run.family.build()


def constructed(family) -> dict:
    """The smaller exact one-hot construction restricted to the family — one feature per
    distinct candidate (:func:`one_hot_candidates`) or per distinct query
    (:func:`query_one_hot`) — each checked on every sequence at every scored position (a
    product family expanded, up to ``MAX_EXPANDED`` sequences; past that no rank, and the
    count read from the product, never from ``len()``).  ``construction`` names the one kept;
    where neither is exact, the candidates' is reported with its error."""
    count = sequence_count(family)
    if count > MAX_EXPANDED:
        return {"rank": None, "sequences": count_json(count), "max_error": None, "exact": False}
    family = as_sequences(family)
    positions = family.scored_positions
    tokens, index = torch.from_numpy(family.tokens).double(), torch.from_numpy(family.index)
    checked = []
    for name, build in (("candidates", one_hot_candidates), ("queries", query_one_hot)):
        model = build(family)
        with torch.no_grad():
            pred = model.predict(tokens, index, positions)[0]
        met = error_metrics(pred, family.targets()[:, positions])
        checked.append(
            {
                "rank": model.scorer.features,
                "sequences": met.sequences,
                "max_error": met.max_error,
                "exact": met.exact,
                "construction": name,
            }
        )
    exact = [c for c in checked if c["exact"]]
    return min(exact, key=lambda c: c["rank"]) if exact else checked[0]


def family_certificates(profile, out: Path, sweep_options: dict) -> dict:
    """Per distinct training family of the sweep of experiment ``out.name``: its certified rank,
    the most overlap levels a query sees, the two-head construction checked on it."""
    certs = {}
    for run, family in distinct_families(sweep_runs(profile, out.name)):
        certs[family_key(run.family)] = {
            "family": run.family.name,
            "params": run.family.params,
            "sha256": run.family.sha256,
            "name": family.name,
            "m": family.m,
            "sequences": count_json(sequence_count(family)),  # a product's count may exceed len()
            "levels": most_levels(family),
            "certified_rank": certify(family).certified_rank if family.matching else None,
            "two_heads": two_heads(family),
        }
    return certs


def local_width(sweep_options: dict, tasks: int) -> int:
    """How many of ``tasks`` a step runs side by side: one per worker of the local pool
    (a cluster's executor trains the sweeps; a step's own work stays in this process)."""
    if sweep_options.get("executor", "local") != "local":
        return 1
    return max(1, min(tasks, sweep_options.get("workers") or available_cores()))


def trained_families(profile, experiment: str, delta, budget_s: float) -> list[dict]:
    """The certificate (at ``delta``, clique search within ``budget_s``) and the constructed rank
    of each distinct family the experiment's sweep trains on."""
    out = []
    for run in distinct_runs(sweep_runs(profile, experiment)):
        family = run.family.load()
        cert = certify(family, delta, budget_s=budget_s)
        out.append(
            {
                "family": family.name,
                "kind": run.family.name,
                "params": run.family.params,
                "sha256": run.family.sha256,
                "m": family.m,
                "length": family.length,
                "n": len(family.matching),
                "sequences": count_json(sequence_count(family)),
                "certified_rank": cert.certified_rank,
                "method": cert.method,
                "constructed_rank": constructed_rank(family),
            }
        )
    return out
