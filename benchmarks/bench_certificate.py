"""Certificate throughput: the product (level) path against the sequence (chain) path.

Certifies one ladder family twice in one process — as a product family
(overlap levels, nothing materialised) and expanded to its sequences
(comparisons over the listed sequences) — checks that both give the same
certificate, and prints the throughput of each in queries·candidates per
second, then ``product_speedup=`` last.  ``--large`` also times the product
path alone on 10⁴ queries × 6·10⁴ candidates at m = 128; ``--wide`` on two
queries and eight candidates at m = 100,000 (the level search depends on the
levels a query sees, not on m: docs/theory.md, "Product families").  ``--layer`` certifies
the layer family at m = 20 (N = 99, 9,252 queries) and m = 24 (N = 338, 112,720 queries)
by rule, ``--layer28`` also m = 28 (N = 1200, 1,432,860 queries): each built and certified
in a fresh process, printing its seconds and peak resident memory (docs/theory.md, "The whole
set by rule").

    python benchmarks/bench_certificate.py [--m 64] [--n 64] [--large] [--wide] [--layer] [--layer28]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from kernelgap.task import ProductFamily, build_family
from kernelgap.theory.certificate import certify


def timed(family):
    start = time.perf_counter()
    cert = certify(family)
    return time.perf_counter() - start, cert


def wide_family(m: int) -> ProductFamily:
    """Two queries of weight m/2, their complements as good candidates, six random candidates."""
    rng = np.random.default_rng(0)
    q1 = np.zeros(m, np.uint8)
    q1[: m // 2] = 1
    q2 = np.zeros(m, np.uint8)
    q2[m // 4 : 3 * m // 4] = 1
    tokens = np.concatenate([[q1, q2, 1 - q1, 1 - q2], rng.integers(0, 2, (6, m), dtype=np.uint8)])
    return ProductFamily(tokens, [0, 1], np.arange(2, 10), 1, [(0, 2), (1, 3)], f"wide-m{m}")


#: The layer certificates of ``--layer`` (and ``--layer28``): (m, N, queries every one certifies).
LAYER_CASES = [(20, 99, 9252), (24, 338, 112_720)]
LAYER_28 = (28, 1200, 1_432_860)

_LAYER_CHILD = """
import json, sys, time
from kernelgap.task import build_family
from kernelgap.theory.certificate import certify
if __name__ == "__main__":
    start = time.perf_counter()
    family = build_family("layer", m=int(sys.argv[1]), length=int(sys.argv[2]))
    built = time.perf_counter()
    cert = certify(family)
    done = time.perf_counter()
    print(json.dumps({"rank": cert.certified_rank, "method": cert.method, "by_rule": cert.radon.by_rule,
                      "build_s": built - start, "certify_s": done - built}))
"""


def layer_case(m: int, length: int, expect: int) -> None:
    """One layer certificate in a child process: its times and peak RSS (``wait4``'s rusage)."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", _LAYER_CHILD, str(m), str(length)], stdout=subprocess.PIPE)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if child.returncode:
        raise SystemExit(f"layer m={m} N={length}: the child failed with {child.returncode}")
    got = json.loads(out)
    assert got["rank"] == expect, got
    print(
        f"layer m={m} N={length}: certified r ≥ {got['rank']:,} ({got['method']}, by rule: {got['by_rule']}); "
        f"build {got['build_s']:.1f} s, certify {got['certify_s']:.1f} s, {wall:.1f} s in all, "
        f"peak RSS {usage.ru_maxrss / 1024:,.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--large", action="store_true", help="also 10^4 queries × 6·10^4 candidates, m = 128")
    parser.add_argument("--wide", action="store_true", help="also 2 queries × 8 candidates, m = 100,000")
    parser.add_argument("--layer", action="store_true", help="also the layer family by rule at m = 20 and 24")
    parser.add_argument("--layer28", action="store_true", help="also the layer family at m = 28 (about 5 s, 0.6 GiB)")
    args = parser.parse_args()
    certify(build_family("hadamard", m=8, n=3))  # warm-up: the first certificate imports igraph
    family = build_family("ladder", m=args.m, n=args.n)
    expanded = family.expand()
    work = len(family.queries) * len(family.candidates)
    t_product, product = timed(family)
    t_sequence, sequence = timed(expanded)
    assert product.certified_rank == sequence.certified_rank and product.sum_eps2 == sequence.sum_eps2
    print(
        f"family: ladder m={args.m}, {len(family.queries)} queries × {len(family.candidates)} candidates "
        f"= {len(expanded):,} sequences; certified r ≥ {product.certified_rank} on both paths"
    )
    print(f"product path:  {t_product:8.3f} s  {work / t_product:14,.0f} queries·candidates/s")
    print(f"sequence path: {t_sequence:8.3f} s  {work / t_sequence:14,.0f} queries·candidates/s")
    if args.large:
        big = build_family("ladder", m=128, n=10_000, rungs=5)
        t_big, cert = timed(big)
        work_big = len(big.queries) * len(big.candidates)
        print(
            f"large: {len(big.queries):,} queries × {len(big.candidates):,} candidates, m = 128: "
            f"{t_big:.1f} s ({work_big / t_big:,.0f} queries·candidates/s), certified r ≥ {cert.certified_rank}"
        )
    if args.wide:
        wide = wide_family(100_000)
        t_wide, cert = timed(wide)
        print(f"wide: 2 queries × 8 candidates, m = 100,000: {t_wide:.3f} s, certified r ≥ {cert.certified_rank}")
    for case in (LAYER_CASES if args.layer or args.layer28 else []) + ([LAYER_28] if args.layer28 else []):
        layer_case(*case)
    print(f"product_speedup={t_sequence / t_product:.1f}")


if __name__ == "__main__":
    main()
