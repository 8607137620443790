"""What a training step costs by stack size and rank: the measurements behind the sweep
planner's cost constants (``kernelgap.sweeps.runner``: ``STEP_OVERHEAD``, ``COLUMN_COST``,
``SLOT_COST``).

Trains ``mlp_exp`` stacks of E members at rank r for a fixed number of steps, on the
witness family (E = 1 … 33, r = 16 and 64) and on the paper profile's OOD n = 32 training
family (E = 3, r = 16 and 128), and prints the time per step, per member-step, and the
estimates the planner derives from them: the fixed cost of a step, the cost of a sequence
slot and of one member's feature column.

    python benchmarks/bench_stacks.py [--steps 150]
"""

from __future__ import annotations

import argparse
import time

import torch

from kernelgap.models import build_model
from kernelgap.sweeps.runner import FamilyCost
from kernelgap.training import FamilySpec, RunConfig, TrainConfig, configure_worker, default_model
from kernelgap.training.trainer import Scored, StackTrainer, vocabulary


def step_ms(family, spec, members: int, steps: int) -> float:
    """Milliseconds per step of a stack of ``members`` copies of ``spec`` (seeds 0…)."""
    model = build_model(
        spec,
        family.m,
        family.length,
        seeds=list(range(members)),
        ranks=[spec.rank] * members,
        vocabulary=vocabulary(family, None),
    )
    cfg = TrainConfig(lr=3e-3, mse_steps=steps // 2, max_steps=steps - steps // 2, stop_below=0.0)
    start = time.perf_counter()
    StackTrainer(model, Scored.of(family, torch.float32), cfg).run()
    return 1000 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    configure_worker(1)
    witness = FamilySpec("witness")
    fam = witness.build()
    step_ms(fam, default_model(feature_map="mlp_exp", rank=16), 3, 20)  # warm-up, not timed
    slots = FamilyCost.of(RunConfig(witness, default_model(), TrainConfig())).slots
    print(f"witness: {len(fam):,} sequences, {slots:,} slots per member")
    times = {}
    for rank in (16, 64):
        for members in (1, 3, 12, 33):
            ms = step_ms(fam, default_model(feature_map="mlp_exp", rank=rank), members, args.steps)
            times[members, rank] = ms
            print(f"  E = {members:2d}, r = {rank:3d}: {ms:6.2f} ms per step, {ms / members:5.2f} per member-step")
    per_member = (times[33, 16] - times[1, 16]) / 32
    fixed = times[1, 16] - per_member
    column = (times[33, 64] - times[33, 16]) / (33 * 48)
    print(
        f"  fixed cost of a step ≈ {fixed:.2f} ms; a member ≈ {1e6 * per_member / slots:.0f} ns per slot; "
        f"a member's feature column ≈ {1000 * column:.2f} µs"
    )
    ood = FamilySpec("ood", {"n": 32, "split": "train", "queries_per_class": 16})
    cost = FamilyCost.of(RunConfig(ood, default_model(), TrainConfig()))
    fam = ood.build()
    print(f"OOD n = 32: {len(fam):,} sequences, {cost.slots:,} slots per member, {cost.block:,} block entries")
    low, high = (
        step_ms(fam, default_model(feature_map="mlp_exp", rank=r, temperature=4.0), 3, args.steps) for r in (16, 128)
    )
    column = (high - low) / (3 * 112)
    print(
        f"  E = 3: r = 16 {low:.1f} ms per step, r = 128 {high:.1f}; a member's feature column ≈ "
        f"{1000 * column:.1f} µs, a slot ≈ {1e6 * (low / 3 - 16 * column) / cost.slots:.0f} ns "
        f"(block entries per slot-cost: {cost.block * (low / 3 - 16 * column) / cost.slots / column:.0f})"
    )


if __name__ == "__main__":
    main()
