"""After the length sweep: the rank-1 construction on every sequence of length 1, 2, 3
(``constructed.json``)."""

from __future__ import annotations

from pathlib import Path

import torch

from ...models.constructions import build_construction
from ...models.verify import check_exhaustive


def construction(profile, out: Path, sweep_options: dict) -> list:
    """The rank-1 construction checked on every sequence of length 1, 2, 3 over {0,1}^m."""
    m = profile.settings["length"]["m"]
    rows = []
    for n in (1, 2, 3):
        res = check_exhaustive(build_construction("rank1", m, n), m, n, torch.device("cpu"))
        rows.append(
            {
                "N": n,
                "rank": 1,
                "m": m,
                "sequences": res["sequences"],
                "max_error": res["max_error"],
                "exact": res["exact"],
            }
        )
    return rows
