"""The zoo's nonnegative maps at their wall: a recipe search per map on one family.

For each nonnegative feature map (``table`` and ``mlp_exp`` included) the search certifies the
family (default: the witness family, certified rank 16) and trains it at ranks from the
certificate up, ``--seeds`` seeds each,
under six recipes: the map's calibrated one, its learning rate × 3 and ÷ 3, four times
the power-mean steps, two fresh starts (``train.restarts = 2``), and distilled from a table
(``train.distill``; docs/experiments.md, "Distilled from the table"; every map but the table).  Per map it prints, for
each recipe, the smallest number of features from which most seeds are exact (max error
< 1/2 at that rank and every larger one tried), then the verdict over the whole search:

- ``at the certificate``: exact (most seeds) at the certified rank c under some recipe;
- ``above it``: exact from F > c features, the gap F − c and ratio F / c given;
- ``not fitted``: no rank tried is exact under any recipe (the search's extent is printed).

    python benchmarks/bench_zoo_search.py [--maps elu1 relu …] [--ranks 16,24,32,48,64,128]
                                          [--family hadamard -p m=24 -p n=23] [--seeds 3] [--json FILE]
                                          [--recipes calibrated distilled …]

Nothing here is asserted (a benchmark); docs/experiments.md ("The zoo at its wall") has the
measured table.  The rank of ``taylor`` counts its largest size ``1 + d + d² ≤ r``, so its
features are read from each record, not the requested rank.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from kernelgap.models.feature_maps import FEATURE_MAPS
from kernelgap.task import EXACT_THRESHOLD
from kernelgap.theory.certificate import certify
from kernelgap.training import FamilySpec, RunConfig, train_records

#: The search: (name, train-field updates of the map's calibrated recipe).
RECIPES = {
    "calibrated": lambda lr, steps: {},
    "lr x3": lambda lr, steps: {"lr": lr * 3},
    "lr /3": lambda lr, steps: {"lr": lr / 3},
    "steps x4": lambda lr, steps: {"max_steps": steps * 4},
    "2 restarts": lambda lr, steps: {"restarts": 2},
    # a table of the same rank trained first, the map's attention fitted to it, then the
    # map's power-mean phase alone (not for the table itself)
    "distilled": lambda lr, steps: {"distill": True, "mse_steps": 0},
}


def runs_of(fm: str, recipe: str, ranks: list[int], seeds: int, family: dict) -> list[RunConfig]:
    base = RunConfig.parse({"family": family, "model": {"kind": "kernel", "feature_map": fm}}).resolved()
    update = RECIPES[recipe](base.train.lr, base.train.max_steps)
    train = {"mse_steps": base.train.mse_steps, "max_steps": base.train.max_steps, "lr": base.train.lr, **update}
    return [
        RunConfig.parse(
            {
                "family": family,
                "model": {"kind": "kernel", "feature_map": fm, "rank": r},
                "train": train,
                "seed": s,
            }
        ).validate()
        for r in ranks
        for s in range(seeds)
    ]


def train_grouped(runs: list[RunConfig]) -> list[dict]:
    """Records of ``runs``, trained one stack per stack key (a map that cannot stack ranks)."""
    groups = defaultdict(list)
    for r in runs:
        groups[r.stack_key()].append(r)
    return [rec for group in groups.values() for rec in train_records(group)]


def exact_from(records: list[dict]) -> int | None:
    """Fewest features from which most seeds are exact at every rank tried (None: never)."""
    by = defaultdict(list)
    for r in records:
        by[r["features"]].append(r["train"]["max_error"] is not None and r["train"]["max_error"] < EXACT_THRESHOLD)
    ok = {f: sum(v) * 2 > len(v) for f, v in by.items()}
    best = None
    for f in sorted(ok, reverse=True):
        if not ok[f]:
            break
        best = f
    return best


def verdict(best: int | None, certified: int, largest: int) -> str:
    if best is None:
        return f"not fitted within {largest} features after the search"
    if best == certified:
        return "at the certificate"
    return f"above it: exact from {best} features (gap {best - certified}, {best / certified:.1f}x)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    maps = [n for n, c in FEATURE_MAPS.items() if c.nonnegative]
    ap.add_argument("--maps", nargs="+", default=maps, choices=maps)
    ap.add_argument("--ranks", default="16,24,32,48,64,128")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--family", default="witness", help="a registered family (default: witness)")
    ap.add_argument("-p", "--param", action="append", default=[], help="family parameter key=value")
    ap.add_argument("--json", default=None, help="also write every row as JSON here")
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    args = ap.parse_args(argv)
    ranks = [int(x) for x in args.ranks.split(",")]
    family = {"name": args.family, "params": {k: int(v) for k, v in (p.split("=", 1) for p in args.param)}}
    certified = certify(FamilySpec.parse(family).build()).certified_rank
    print(f"{args.family} {family['params']}: certified rank {certified}", flush=True)
    out = []
    for fm in args.maps:
        found = {}
        for recipe in args.recipes:
            if recipe == "distilled" and fm == "table":
                continue  # the teacher itself
            t = time.perf_counter()
            recs = train_grouped(runs_of(fm, recipe, ranks, args.seeds, family))
            found[recipe] = exact_from(recs)
            best_err = min(r["train"]["max_error"] or float("inf") for r in recs)
            largest = max(r["features"] for r in recs)
            print(
                f"{fm:10s} {recipe:11s} exact_from={found[recipe]} best_max_error={best_err:.3f} "
                f"largest={largest} ({time.perf_counter() - t:.0f} s)",
                flush=True,
            )
            out.append(
                {
                    "map": fm,
                    "recipe": recipe,
                    "exact_from": found[recipe],
                    "best_max_error": best_err,
                    "largest": largest,
                }
            )
        if not found:
            continue
        hits = [f for f in found.values() if f is not None]
        best = min(hits) if hits else None
        print(f"{fm:10s} verdict: {verdict(best, certified, largest)}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
