"""After the series sweep: per family, both bounds and the one-hot construction (``series.json``)."""

from __future__ import annotations

from pathlib import Path

from ...theory.certificate import certify
from ..steps import constructed, distinct_families, sweep_runs


def certificates(profile, out: Path, sweep_options: dict) -> list:
    """Per family of the series: both bounds and the one-hot construction on every sequence."""
    rows = []
    for run, family in distinct_families(sweep_runs(profile, "series")):
        cert = certify(family)
        rows.append(
            {
                "family": family.name,
                "params": run.family.params,
                "n": len(family.matching),
                "m": family.m,
                "sequences": len(family),
                "certified_rank": cert.certified_rank,
                "radon_rank": cert.radon.rank,
                "trace_rank": cert.trace.rank,
                "constructed": constructed(family),
            }
        )
    return sorted(rows, key=lambda r: r["n"])
