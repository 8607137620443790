"""Size limits shared by the family builders and the models: what is refused before allocating.

A request past a limit is refused with a one-line :class:`~kernelgap.errors.KernelgapError`.
The chief one is memory: a request whose estimated bytes exceed :func:`memory_limit`
(:data:`MEMORY_FRACTION` of the physical memory, or of a lower cgroup limit).  Builders
estimate their largest arrays from their parameters alone, the working copies of sorting and
deduplication included; a model counts its parameters at 4 bytes each (float32, the smallest
training dtype), so the estimate is a floor and a refused model could never have been built.
Every number a flag takes is bounded here too (:data:`FLAG_BOUNDS`).

The limits are defined here and nowhere else, but for the size of an input file
(:data:`kernelgap.io.MAX_INPUT_BYTES`), which belongs to the reader that checks it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .errors import KernelgapError

#: Share of the machine's memory one build or model may plan to use.
MEMORY_FRACTION = 0.5

#: Most features per head of a model (the largest rank any experiment trains is 256).
MAX_RANK = 1 << 20

#: Most steps of one training phase (the recipes use 10³–10⁴; a step takes at least ~1 ms).
MAX_STEPS = 10**7
#: Largest learning rate (``train.lr``): far past any that trains (a diverging run is still a
#: run to record), and small enough that the probe's recipe search, which triples it, stays finite.
MAX_LR = 1e100
#: Most fresh starts of one run (``train.restarts``; each is a whole training schedule).
MAX_RESTARTS = 64
#: Widest start of a pruned run, as a multiple of its rank (``train.prune_from``).
MAX_PRUNE_FROM = 8
#: Widest embedding or hidden layer a model may ask for.
MAX_WIDTH = 1 << 16

#: Most values of m one bound curve walks (each is a family built and certified).
MAX_CURVE_POINTS = 1000

#: Sub-word keys one pass of the sub-word distance test holds (8 bytes each: 256 MiB); a test
#: with more keys sorts them in passes (:mod:`kernelgap.task.packed`).
SUBWORD_CHUNK_KEYS = 1 << 25
#: Most sub-word keys one distance test sorts, over all its passes (about 10⁹: a few minutes);
#: the least-distance search stops with its proven lower bound before a larger test.
MAX_SUBWORD_KEYS = 1 << 30
#: Most words a code's distance check compares pair by pair (``n²/2`` overlaps: about 10¹⁰ at
#: this size, minutes); a larger code is checked by sub-word keys or refused.
MAX_GRAM_CHECK_WORDS = 1 << 17

#: Most matching entries of a product family certified with the ``n × n`` pair matrices (level
#: search, trace bound, clique search: time and memory grow with n², and 2^12 entries keep each
#: matrix at 2^24 pairs); above it a complement-shaped family is certified by rule, and this many
#: of its entries form the sub-family certified densely (:mod:`kernelgap.theory.certificate`).
DENSE_QUERIES = 4096

#: Most tasks one command runs at once (``--workers``; a process each).
MAX_WORKERS = 4096
#: Most runs one sweep file may plan (``variants × grid``, counted before the grid is listed).
MAX_SWEEP_RUNS = 100_000
#: Longest time limit of a probed module's phase, in seconds (about 11.6 days).
MAX_SECONDS = 1_000_000
#: Deepest nesting of a JSON value given on the command line (``--kwargs``, ``--arg``).
MAX_JSON_DEPTH = 32
#: Largest m whose tokens {0,1}^m are checked exhaustively: each construction's per-token tables
#: are ``2^m × 2^m`` float64 (128 MiB at m = 12, where the positive construction stops being built).
MAX_VERIFY_M = 12
#: Most (query, key) pairs, ``2^{mN}·N²``, that one construction is checked on at one length:
#: the work of m = 9 at N = 3 (2^27 sequences of 9 pairs).
MAX_VERIFY_PAIRS = 9 << 27
#: The longest length the pair limit admits at all (m = 1): a larger N is refused whatever m is.
MAX_VERIFY_LENGTH = max(n for n in range(1, MAX_VERIFY_PAIRS.bit_length()) if (1 << n) * n * n <= MAX_VERIFY_PAIRS)
#: The lengths ``verify`` checks when none are given.
DEFAULT_LENGTHS = (1, 2, 3)

#: The range of each bounded number flag (:func:`kernelgap.args.bounded_flags` applies them).
FLAG_BOUNDS: dict[str, tuple[float, float]] = {
    "--workers": (1, MAX_WORKERS),
    "--cpus-per-task": (0, MAX_WORKERS),
    "--gpus-per-task": (0, MAX_WORKERS),
    "--rlimit": (1, 10**12),
}

_CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory() -> int:
    """Bytes of memory this process may use."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        total = 16 << 30  # no sysconf (not Linux or macOS): assume a 16 GiB machine
    for name in _CGROUP_FILES:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def memory_limit() -> int:
    return int(machine_memory() * MEMORY_FRACTION)


def format_bytes(n: float) -> str:
    """``1536 → '1.5 KiB'``; very large sizes stay readable (``'8.7e+11 TiB'``, ``'2^1200 B'``)."""
    if isinstance(n, int) and n.bit_length() > 1000:  # beyond a float
        return f"2^{n.bit_length() - 1} B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB" if n < 1e4 else f"{n:.2g} TiB"


def check_memory(what: str, needed: int, error: type[KernelgapError] = KernelgapError) -> None:
    """Refuse ``what`` when its estimated ``needed`` bytes exceed :func:`memory_limit`."""
    limit = memory_limit()
    if needed > limit:
        raise error(
            f"{what} needs about {format_bytes(needed)} of memory; the limit is {format_bytes(limit)} "
            f"({MEMORY_FRACTION:.0%} of this machine's {format_bytes(machine_memory())})"
        )


def check_rank(rank: int, where: str = "model.rank", error: type[KernelgapError] = KernelgapError) -> None:
    if rank > MAX_RANK:
        raise error(f"{where} must be ≤ {MAX_RANK:,} features per head, got {rank:,}")


def number_problem(value: float, low: float | None = None, high: float | None = None) -> str | None:
    """Why ``value`` is not a finite number in ``low..high`` (the text after its name), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f" must be a finite number, got {value}"
    if low is not None and value < low:
        return f" must be ≥ {low}, got {value}"
    if high is not None and value > high:
        return f" must be ≤ {high:,}, got {value:,}"
    return None


def check_workers(workers: int | None) -> None:
    """Refuse a number of workers outside ``1..MAX_WORKERS`` (None: as many as cores)."""
    problem = None if workers is None else number_problem(workers, *FLAG_BOUNDS["--workers"])
    if problem:
        raise KernelgapError(f"--workers{problem}")


def check_size(m: int, length: int) -> None:
    """Refuse a length whose ``2^{mN}·N²`` pairs exceed :data:`MAX_VERIFY_PAIRS` (the exponent
    is compared first, so ``2^{mN}`` is never formed for a huge m·N)."""
    bits = m * length
    if bits >= MAX_VERIFY_PAIRS.bit_length() or (1 << bits) * length * length > MAX_VERIFY_PAIRS:
        raise KernelgapError(
            f"--m {m} at length N = {length} is too large for exhaustive checking: 2^{bits} sequences × "
            f"{length}² pairs; at most 2^(mN)·N² ≤ 9·2^27 pairs (e.g. m = 9 at N = 3, m = 4 at N = 6)"
        )


def check_verify(m: int, lengths=None) -> tuple[int, ...]:
    """The lengths an exhaustive check of {0,1}^m makes (:data:`DEFAULT_LENGTHS` for None), each
    within the pair limit; refused in one line otherwise.  Torch-free, so ``verify`` refuses
    before importing it."""
    if m < 1:
        raise KernelgapError(f"--m must be ≥ 1, got {m}")
    if m > MAX_VERIFY_M:
        raise KernelgapError(
            f"--m {m} is too large for exhaustive checking (tables of 2^m × 2^m per construction); "
            f"use m ≤ {MAX_VERIFY_M}"
        )
    lengths = DEFAULT_LENGTHS if lengths is None else tuple(lengths)
    for n in lengths:
        if n < 1:
            raise KernelgapError(f"--length must be ≥ 1, got {n}")
        if n > MAX_VERIFY_LENGTH:
            raise KernelgapError(
                f"--length {n} is too large for exhaustive checking: 2^(mN)·N² > 9·2^27 pairs for "
                f"every m ≥ 1 (N ≤ {MAX_VERIFY_LENGTH})"
            )
        check_size(m, n)
    return lengths


#: The exact wall (``kernelgap wall``, the ``exact_wall`` experiment): its largest m (the cube's
#: order problem has ``4^m`` entries per feature) and z3's work budget (rlimit) per solver call.
MAX_WALL_M = 6
WALL_RLIMIT = 200_000_000
