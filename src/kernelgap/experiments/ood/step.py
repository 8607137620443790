"""After the OOD sweep: per problem size, m, sequence counts and the share of test answers
needing a sharp choice (``sizes.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from ...task.minip import choice_gap_share
from ..steps import distinct_families, sweep_runs


def sizes(profile, out: Path, sweep_options: dict) -> dict:
    """Per problem size: m, sequence counts, share of test answers needing a gap-≥2 choice."""
    sizes = {}
    for run, train in distinct_families(r for r in sweep_runs(profile, "ood") if r.test_family is not None):
        test = run.test_family.build()
        sizes[json.dumps(run.family.params, sort_keys=True)] = {
            "label": f"n={run.family.params.get('n')}, m={train.m}",
            "m": train.m,
            "train_sequences": len(train),
            "test_sequences": len(test),
            "test_gap_share": choice_gap_share(test.gram(), test.index, test.scored_positions),
        }
    return sizes
