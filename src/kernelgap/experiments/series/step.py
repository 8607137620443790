"""After the series sweep: per family, both bounds and the one-hot construction (``series.json``)."""

from __future__ import annotations

from pathlib import Path

from ...task.family import count_json, sequence_count
from ...theory.certificate import certify
from ..steps import constructed, distinct_runs, sweep_runs

#: The order of the family types in ``series.json`` (then by queries n): the Hadamard
#: witness families first, where the certificate is n, then those where it falls below n.
KIND_ORDER = ("hadamard", "cw", "ladder")


def _constructed(family) -> dict:
    """The one-hot construction on every sequence (:func:`~..steps.constructed`); where it
    cannot be built, no rank."""
    if family.length != 3 or family.query_position is None:
        return {"rank": None, "sequences": count_json(sequence_count(family)), "max_error": None, "exact": False}
    return constructed(family)


def certificates(profile, out: Path, sweep_options: dict) -> list:
    """Per family of the series: both bounds and the one-hot construction on every sequence."""
    rows = []
    for run in distinct_runs(sweep_runs(profile, "series")):
        family = run.family.load()  # as built: a product family stays a product for the certificate
        cert = certify(family)
        rows.append(
            {
                "family": family.name,
                "kind": run.family.name,
                "params": run.family.params,
                "sha256": run.family.sha256,
                "n": len(family.matching),
                "m": family.m,
                "sequences": count_json(sequence_count(family)),
                "certified_rank": cert.certified_rank,
                "radon_rank": cert.radon.rank,
                "trace_rank": cert.trace.rank,
                "constructed": _constructed(family),
            }
        )
    order = {k: i for i, k in enumerate(KIND_ORDER)}
    return sorted(rows, key=lambda r: (order.get(r["kind"], len(order)), r["kind"], r["n"], r["m"]))
