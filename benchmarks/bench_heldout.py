"""Held-out families: does the default ``table`` recipe reach the certificate on families it never saw?

A generator of its own (numpy only, independent of :mod:`kernelgap.task`) writes product-layout
family files (docs/formats.md, "Family files"): rows of Sylvester and Paley Hadamard matrices and
random constant-weight codes with capped overlaps, their rows and bit columns shuffled, the
candidates listed in a shuffled order, each query's good candidate its complement.  Each family
is certified (``kernelgap.theory.certificate.certify``: it must be n, the number of queries),
then the ``table`` map trains at the certified rank ``r₀`` with the default recipe (every
training field left at its default, ``seeds`` seeds in one stack) and at ``r₀ − 1`` with one
seed: nothing can be exact below the certificate.  Prints one row per family: its size, the
certified rank, how many seeds are exact at ``r₀`` (max error < 1/2), their max errors and
steps, the max error at ``r₀ − 1``, and wall time; then ``heldout_exact_share=`` — the share of
families exact on at least 3 of 4 seeds (docs/experiments.md, "Training recipe", "Held-out
families", has the measured table).  ``--feature-map MAP --distill`` trains another map the same
way, each run distilled from a table trained first (docs/experiments.md, "Distilled from the table");
``--prune-from F`` trains each table F times wider first and cuts it to its rank
(docs/experiments.md, "Pruned from a wider table").

    python benchmarks/bench_heldout.py [--set test|calibration|all] [--seeds 4] [--max-n 64]
                                       [--only NAME ...] [--out DIR] [--no-below]
                                       [--feature-map MAP] [--distill] [--prune-from F]

The ``calibration`` set (generator seed 7) is what the recipe was tuned on; the ``test`` set
(generator seed 2027, other sizes) was only measured.  Families with n up to 64 have up to
262,144 sequences: the whole test set takes about an hour on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kernelgap.task import parse_family_bytes
from kernelgap.theory.certificate import certify
from kernelgap.training import FamilySpec, RunConfig, train_records

# -- the generator (numpy only) ---------------------------------------------------------------


def sylvester(order: int) -> np.ndarray:
    """``H_{2k} = [[H, H], [H, −H]]`` from ``H_1 = [1]``; ``order`` a power of 2."""
    h = np.ones((1, 1), dtype=np.int64)
    while len(h) < order:
        h = np.kron(np.array([[1, 1], [1, -1]]), h)
    if len(h) != order:
        raise SystemExit(f"no Sylvester matrix of order {order}")
    return h


def paley(q: int) -> np.ndarray:
    """Paley's first construction, order ``q + 1`` for a prime ``q ≡ 3 (mod 4)``: the Jacobsthal
    matrix ``J[a, b] = χ(b − a)`` (χ the quadratic character) bordered and with ``I`` added."""
    if q % 4 != 3 or any(q % d == 0 for d in range(2, int(q**0.5) + 1)):
        raise SystemExit(f"Paley's construction needs a prime q ≡ 3 mod 4, got {q}")
    squares = np.zeros(q, dtype=bool)
    squares[(np.arange(1, q) ** 2) % q] = True
    diff = (np.arange(q)[None, :] - np.arange(q)[:, None]) % q
    jac = np.where(diff == 0, 0, np.where(squares[diff], 1, -1))
    s = np.zeros((q + 1, q + 1), dtype=np.int64)
    s[0, 1:], s[1:, 0], s[1:, 1:] = 1, -1, jac
    return s + np.eye(q + 1, dtype=np.int64)


def hadamard_rows(h: np.ndarray) -> np.ndarray:
    """The rows but the first of ``h`` normalised (first row and column +1), as 0/1 words of weight
    m/2 and pairwise overlap m/4 (checked)."""
    m = len(h)
    if not np.array_equal(h @ h.T, m * np.eye(m, dtype=np.int64)):
        raise SystemExit(f"not a Hadamard matrix (order {m})")
    h = h * h[:, :1]
    h = h * h[:1, :]
    rows = (h[1:] > 0).astype(np.int64)
    gram = rows @ rows.T
    assert (np.diag(gram) == m // 2).all() and (gram[~np.eye(len(rows), dtype=bool)] == m // 4).all()
    return rows


def constant_weight(m: int, w: int, cap: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` words of weight ``w`` with pairwise overlaps ≤ ``cap``: random words kept greedily,
    in batches, restarted when the code stalls."""
    for _ in range(20):
        words = np.zeros((0, m), dtype=np.int64)
        for _ in range(2000):
            batch = np.zeros((256, m), dtype=np.int64)
            np.put_along_axis(batch, np.argsort(rng.random((256, m)), axis=1)[:, :w], 1, axis=1)
            for x in batch:
                if not len(words) or (words @ x).max() <= cap:
                    words = np.vstack([words, x])
                    if len(words) == n:
                        return words
    raise SystemExit(f"no constant-weight code m={m} w={w} cap={cap} with {n} words found")


def family_dict(words: np.ndarray, name: str, rng: np.random.Generator, position: int = 1) -> dict:
    """A product family: the words (rows and bit columns shuffled) as queries, their complements as
    the candidates (listed shuffled), each query matched to its complement."""
    words = words[rng.permutation(len(words))][:, rng.permutation(words.shape[1])]
    bits = ["".join(map(str, row)) for row in words]
    goods = ["".join(map(str, 1 - row)) for row in words]
    return {
        "m": int(words.shape[1]),
        "query_position": position,
        "name": name,
        "queries": bits,
        "candidates": [goods[i] for i in rng.permutation(len(goods))],
        "matching": [[q, g] for q, g in zip(bits, goods)],
    }


#: (kind, arguments, n) per family of a set; Hadamard rows are picked at random, n of m − 1.
SETS = {
    "calibration": (
        7,
        [
            ("sylvester", 32, 16),
            ("sylvester", 32, 20),
            ("paley", 31, 20),
            ("cw", (64, 8, 2), 20),
            ("cw", (48, 8, 2), 24),
            ("cw", (96, 12, 3), 30),
            ("sylvester", 32, 31),
            ("paley", 31, 31),
            ("cw", (80, 10, 2), 40),
            ("sylvester", 64, 40),
            ("paley", 43, 43),
            ("cw", (96, 12, 3), 64),
            ("sylvester", 64, 63),
        ],
    ),
    "test": (
        2027,
        [
            ("sylvester", 32, 24),
            ("paley", 23, 18),
            ("paley", 31, 26),
            ("cw", (40, 8, 2), 16),
            ("cw", (70, 10, 2), 28),
            ("cw", (72, 12, 3), 24),
            ("cw", (120, 12, 3), 36),
            ("cw", (64, 10, 3), 32),
            ("paley", 47, 47),
            ("sylvester", 64, 48),
            ("cw", (100, 10, 2), 48),
            ("paley", 59, 56),
            ("cw", (128, 16, 4), 64),
            ("sylvester", 64, 60),
        ],
    ),
}


def build_set(which: str) -> list[dict]:
    seed, specs = SETS[which]
    rng = np.random.default_rng(seed)
    out = []
    for i, (kind, arg, n) in enumerate(specs):
        if kind == "cw":
            m, w, cap = arg
            words = constant_weight(m, w, cap, n, rng)
            name = f"cw-m{m}-w{w}-c{cap}-n{n}"
        else:
            rows = hadamard_rows(sylvester(arg) if kind == "sylvester" else paley(arg))
            words = rows[rng.choice(len(rows), n, replace=False)]
            name = f"{kind}{len(rows) + 1}-n{n}"
        out.append(family_dict(words, f"{which}-{name}", rng, position=1 + i % 3))
    return out


# -- the measurement --------------------------------------------------------------------------


def runs(path: Path, rank: int, seeds, feature_map: str = "table", train: dict | None = None) -> list[RunConfig]:
    spec = FamilySpec.from_file(path).model_dump(exclude_none=True)
    model = {"kind": "kernel", "feature_map": feature_map, "rank": rank}
    train = train or {}
    return [RunConfig.parse({"family": spec, "model": model, "train": train, "seed": s}).validate() for s in seeds]


def measure(path: Path, seeds: int, below: bool, feature_map: str = "table", train: dict | None = None) -> dict:
    family = parse_family_bytes(path.read_bytes(), path)
    n = len(family.matching)
    cert = certify(family).certified_rank
    start = time.perf_counter()
    records = train_records(runs(path, cert, range(seeds), feature_map, train))
    row = {
        "family": family.name,
        "m": family.m,
        "n": n,
        "certified": cert,
        "exact": sum(r["train"]["max_error"] < 0.5 for r in records),
        "max_errors": [round(r["train"]["max_error"], 3) for r in records],
        "steps": [r["steps"] for r in records],
        **(
            {"teacher_max_errors": [round(r["distilled"]["teacher"]["max_error"], 3) for r in records]}
            if (train or {}).get("distill")
            else {}
        ),
    }
    if below and cert > 1:
        (rec,) = train_records(runs(path, cert - 1, [0], feature_map, train))
        row["below_max_error"] = round(rec["train"]["max_error"], 3)
        if rec["train"]["max_error"] < 0.5:
            raise SystemExit(f"{family.name}: exact at rank {cert - 1}, below its certificate {cert}")
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["test", "calibration", "all"], default="test")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--max-n", type=int, default=64, help="skip families with more queries")
    ap.add_argument("--only", nargs="*", default=None, help="family names (or parts of them) to run")
    ap.add_argument("--out", default=None, help="folder for the family files and results.jsonl (default: temporary)")
    ap.add_argument("--no-below", action="store_true", help="skip the run one rank below the certificate")
    ap.add_argument("--feature-map", default="table", help="the map trained (default: table)")
    ap.add_argument("--distill", action="store_true", help="distil each run from a table trained first")
    ap.add_argument("--prune-from", type=float, default=1.0, help="train each table this many times wider first")
    args = ap.parse_args(argv)
    train = {"distill": True} if args.distill else {}
    if args.prune_from != 1.0:
        train["prune_from"] = args.prune_from
    sets = ["calibration", "test"] if args.set == "all" else [args.set]
    out = Path(args.out or tempfile.mkdtemp(prefix="heldout-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for which in sets:
        for fam in build_set(which):
            if len(fam["queries"]) > args.max_n or (args.only and not any(s in fam["name"] for s in args.only)):
                continue
            path = out / f"{fam['name']}.json"
            path.write_text(json.dumps(fam))
            row = measure(path, args.seeds, not args.no_below, args.feature_map, train)
            rows.append(row)
            with open(out / "results.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            print(
                f"{row['family']:34s} m={row['m']:3d} n={row['n']:2d} r0={row['certified']:2d} "
                f"exact {row['exact']}/{args.seeds} max {row['max_errors']} steps {row['steps']} "
                + (f"teachers {row['teacher_max_errors']} " if args.distill else "")
                + f"below {row.get('below_max_error', '-')} {row['seconds']} s",
                flush=True,
            )
    if rows:
        ok = sum(r["exact"] >= min(3, args.seeds) for r in rows)
        print(f"heldout_exact_share={ok / len(rows):.3f} ({ok} of {len(rows)} families; files in {out})")


if __name__ == "__main__":
    sys.exit(main())
