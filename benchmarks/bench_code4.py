"""At δ = 1/2, beyond Graham–Sloane: the table of docs/experiments.md ("Beyond Graham–Sloane").

Per even m, every code the ``layer`` and ``code4`` families build (the cyclic Graham–Sloane
class, the largest class over every abelian group of order m, S(5, 6, 12) at m = 12, and the
cyclic class grown by the local search where m ≤ 20), each certified with the ordinary
certificate at δ = 1/2 at its least length ``N = 2 + ⌈√(n − 1)⌉`` (the least N with
``(N − 2)² ≥ n − 1``) and one shorter, beside the Johnson bound of ``A(m, 4, m/2)``, the ceiling
of pair certificates ``⌊2C(m, m/2)/(m + 2)⌋`` and ``C(m, m/2)`` (docs/theory.md, "The ceiling
of pair certificates").  Each line is one code; the certified sizes are checked (all n at the
least length, fewer one shorter).

    python benchmarks/bench_code4.py [--m 12 --m 16 …] [--steps 40000]

The same certificates from the command line: ``kernelgap certify --family code4 -p m=16
-p construction=search -p steps=40000 -p length=33`` (or ``-p construction=group``,
``-p construction=steiner``; ``--family layer -p m=16 -p length=31`` for Graham–Sloane).
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

from kernelgap.task import ProductFamily, build_family
from kernelgap.task.codes import johnson_bound
from kernelgap.task.families.code4 import MAX_SEARCH_M
from kernelgap.theory.ceiling import pair_ceiling
from kernelgap.theory.certificate import certify

HALF = Fraction(1, 2)


def least_length(n: int) -> int:
    """The least N with ``(N − 2)² ≥ n − 1``."""
    return 2 + math.isqrt(n - 2) + 1 if n > 2 else 3


def codes(m: int, steps: int) -> list[tuple[str, str, dict]]:
    """``(label, family, params)`` of every code built at m."""
    out = [("Graham–Sloane (cyclic)", "layer", {"m": m}), ("best group class", "code4", {"m": m})]
    if m == 12:
        out.append(("S(5, 6, 12)", "code4", {"m": 12, "construction": "steiner"}))
    if m <= MAX_SEARCH_M:
        out.append((f"search, {steps:,} steps", "code4", {"m": m, "construction": "search", "steps": steps}))
    return out


def at_length(family: ProductFamily, length: int) -> ProductFamily:
    """The same queries and candidates at context length N (every sequence of N − 1 candidates)."""
    return ProductFamily(
        family.tokens,
        family.queries,
        family.candidates,
        family.query_position,
        family.matching,
        family.name,
        family.meta,
        length,
    )


def certify_code(family: str, params: dict) -> tuple[int, int, int, int, float]:
    """``(n, N, certified at N, certified at N − 1, seconds)``."""
    start = time.perf_counter()
    built = build_family(family, **params, length=3)
    n = built.meta["words"]
    length = least_length(n)
    at, below = (certify(at_length(built, k), HALF).certified_rank for k in (length, length - 1))
    if at != n or below >= n:
        raise AssertionError(f"{family} {params}: certified {at} at N = {length} and {below} below, n = {n}")
    return n, length, at, below, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, action="append", help="even m (repeatable; default 12, 14, …, 24)")
    parser.add_argument("--steps", type=int, default=40_000, help="perturbations of the local search")
    args = parser.parse_args()
    print(
        "| m | code | n | N | certified at N | at N − 1 | vs Graham–Sloane | Johnson A(m, 4, m/2) "
        "| pair ceiling | C(m, m/2) | n / 2^m | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in args.m or range(12, 25, 2):
        w = m // 2
        johnson, ceiling, layer = johnson_bound(m, w, w - 2), pair_ceiling(m, 2), math.comb(m, w)
        base = None
        for label, family, params in codes(m, args.steps):
            n, length, at, below, seconds = certify_code(family, params)
            base = n if base is None else base
            print(
                f"| {m} | {label} | {n:,} | {length:,} | {at:,} | {below:,} | {n / base:.3f} | {johnson:,} "
                f"| {ceiling:,} | {layer:,} | {n / 2**m:.2%} | {seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
