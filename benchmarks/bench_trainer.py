"""Stacked vs per-model training on the witness family.

Trains ranks {1,2,4,8,16,32} × 5 seeds with the ``table`` map for a fixed
number of steps (no early stop) twice in one process — once as one stack of
30 members, once as a loop of 30 lone models — checks that every run's
metrics agree, and prints ``stacked_speedup=<loop time / stack time>`` last.

    python benchmarks/bench_trainer.py [--steps 300] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from kernelgap.models import build_model
from kernelgap.task import build_family
from kernelgap.training import TrainConfig, configure_worker, default_model, train_stack

RANKS = [1, 2, 4, 8, 16, 32]
SEEDS = [0, 1, 2, 3, 4]


def timed_stack(family, spec, cfg, seeds, ranks):
    """Build and train one stack; returns (seconds, results)."""
    start = time.perf_counter()
    model = build_model(spec, family.m, family.length, seeds=seeds, ranks=ranks, vocabulary=family.tokens)
    results = train_stack(model, family, cfg)
    return time.perf_counter() - start, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="total steps (1/3 MSE, 2/3 power mean)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    args = parser.parse_args()
    configure_worker(args.threads)
    family = build_family("witness")
    spec = default_model(feature_map="table", rank=max(RANKS))
    cfg = TrainConfig(lr=3e-2, mse_steps=args.steps // 3, max_steps=args.steps - args.steps // 3, stop_below=None)
    runs = [(r, s) for r in RANKS for s in SEEDS]
    timed_stack(family, spec, TrainConfig(lr=3e-2, mse_steps=5, max_steps=5), [0], [1])  # warm-up
    stack_s, stacked = timed_stack(family, spec, cfg, [s for _, s in runs], [r for r, _ in runs])
    loop_s, alone = 0.0, []
    for r, s in runs:
        seconds, (result,) = timed_stack(family, spec, cfg, [s], [r])
        loop_s += seconds
        alone.append(result)
    worst = max(abs(a.train["max_error"] - b.train["max_error"]) for a, b in zip(stacked, alone))
    agree = (
        all(a.status == b.status and a.train["exact"] == b.train["exact"] for a, b in zip(stacked, alone))
        and worst < 1e-3
    )
    print(f"models={len(runs)} steps={args.steps} threads={torch.get_num_threads()}")
    print(
        f"stacked: {stack_s:.2f}s ({stack_s / args.steps * 1e3:.2f} ms/step, "
        f"{stack_s / args.steps / len(runs) * 1e3:.3f} ms/model-step)"
    )
    print(f"loop:    {loop_s:.2f}s ({loop_s / args.steps / len(runs) * 1e3:.3f} ms/model-step)")
    print(f"metrics agree: {agree} (max |Δ max_error| = {worst:.2e})")
    if not agree:
        raise SystemExit("stacked and per-model metrics disagree")
    print(f"stacked_speedup={loop_s / stack_s:.2f}")


if __name__ == "__main__":
    main()
