"""The OOD trainer: the paper profile's heaviest n = 32 stack, present path against the old one.

The stack is the 12 ``mlp_exp`` runs of ranks 16, 32, 64, 128 (seeds 0–2) that
the planner used to train as one stack, every member padded to rank 128, on the
dense ``T × T`` tables (the reference path).  The new path trains the same runs
as the planner now splits them (a stack's padding costs at most one step's fixed
cost, :data:`kernelgap.sweeps.runner.STEP_OVERHEAD`) on tables computed over the
block of pairs the family uses.
Both train a fixed number of steps in one process; every run must end with the
same metrics within float tolerance.  Prints the time per step of each, the
matrix-product FLOPs of one step of each (forward and backward, counted by
``torch.utils.flop_counter``) and their ratio ``flop_ratio=`` (what the block
tables save in arithmetic: the speedup a path with equal FLOP throughput would
reach), and ``ood_speedup=`` last.

    python benchmarks/bench_ood.py [--steps 60] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

from torch.utils.flop_counter import FlopCounterMode

from kernelgap.experiments.profile import load_profile
from kernelgap.models import build_model
from kernelgap.sweeps.config import load_sweep
from kernelgap.sweeps.runner import plan_tasks
from kernelgap.training import DTYPES, configure_worker
from kernelgap.training.trainer import Scored, StackTrainer, vocabulary


def build(stack, family):
    first = stack[0]
    return build_model(
        first.model,
        family.m,
        family.length,
        seeds=[r.seed for r in stack],
        ranks=[r.model.rank for r in stack],
        vocabulary=vocabulary(family, None),
        dtype=DTYPES[first.train.dtype],
    )


def train(stack, family, planned: bool) -> list:
    model = build(stack, family)
    return StackTrainer(model, Scored.of(family, model.dtype, planned=planned), stack[0].train).run()


def step_flops(stack, family, planned: bool) -> int:
    """Matrix-product FLOPs of one training step (the loss's forward and backward)."""
    model = build(stack, family)
    scored = Scored.of(family, model.dtype, planned=planned)
    with FlopCounterMode(display=False) as counter:
        scored.errors(model).square().mean(dim=(1, 2)).sum().backward()
    return counter.get_total_flops()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="total steps (1/3 MSE, 2/3 power mean)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    args = parser.parse_args()
    configure_worker(args.threads)
    runs = [
        r.resolved()
        for r in load_sweep(load_profile("paper").sweep_file("ood")).runs()
        if r.family.params["n"] == 32 and r.model.kind == "kernel" and r.model.rank >= 16
    ]
    runs = [
        r.model_copy(
            update={
                "train": r.train.model_copy(
                    update={"mse_steps": args.steps // 3, "max_steps": args.steps - args.steps // 3}
                )
            }
        )
        for r in sorted(runs, key=lambda r: (r.model.rank, r.seed))
    ]
    family = runs[0].family.build()
    start = time.perf_counter()
    reference = train(runs, family, planned=False)
    t_ref = time.perf_counter() - start
    stacks = plan_tasks(runs, workers=1)
    start = time.perf_counter()
    new = {}
    for stack in stacks:
        new.update(zip((r.run_id() for r in stack), train(stack, family, planned=True)))
    t_new = time.perf_counter() - start
    for run, ref in zip(runs, reference):
        got = new[run.run_id()].train["max_error"]
        assert abs(got - ref.train["max_error"]) <= 1e-3 * max(1.0, ref.train["max_error"]), (run.model.rank, got, ref)
    flops_ref = step_flops(runs, family, planned=False)
    flops_new = sum(step_flops(stack, family, planned=True) for stack in stacks)
    t = len(family.tokens)
    print(f"family: ood n=32, {t} tokens, {len(family):,} sequences")
    print(f"runs: mlp_exp ranks 16/32/64/128 × seeds 0–2, {args.steps} steps, {args.threads} thread(s)")
    print(f"reference: one stack padded to 128, dense tables: {1000 * t_ref / args.steps:8.1f} ms per step")
    print(
        f"present:   stacks {[[r.model.rank for r in s] for s in stacks]}, block tables: "
        f"{1000 * t_new / args.steps:8.1f} ms per step"
    )
    print(f"matrix products per step: reference {flops_ref / 1e9:.2f} GFLOP, present {flops_new / 1e9:.2f} GFLOP")
    print(f"flop_ratio={flops_ref / flops_new:.2f}")
    print(f"ood_speedup={t_ref / t_new:.2f}")


if __name__ == "__main__":
    main()
