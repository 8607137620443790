"""Size limits shared by the family builders and the models: what is refused before allocating.

A request is refused with a one-line :class:`~kernelgap.errors.KernelgapError` when

* its estimated memory exceeds :func:`memory_limit`, which is
  :data:`MEMORY_FRACTION` of this machine's memory (the physical memory, or the
  cgroup limit of the process when that is lower).  Builders estimate their
  largest arrays from their parameters alone (``bytes = Σ elements × item
  size``, the working copies of sorting and deduplication included); a model
  counts its parameters at 4 bytes each (float32, the smallest training dtype),
  so the estimate is a floor and a refused model could never have been built;
* a model asks for more than :data:`MAX_RANK` features per head;
* a bound curve asks for more than :data:`MAX_CURVE_POINTS` values of m;
* a training phase asks for more than :data:`MAX_STEPS` steps, a run for more than
  :data:`MAX_RESTARTS` fresh starts, a start :data:`MAX_PRUNE_FROM` times its rank, a layer for more than
  :data:`MAX_WIDTH` units;
* a code's distance check would sort more than :data:`MAX_SUBWORD_KEYS` sub-word keys and
  scan more than :data:`MAX_GRAM_CHECK_WORDS` words pair by pair (the check's time).

The limits are defined here and nowhere else, but for the size of an input file
(:data:`kernelgap.io.MAX_INPUT_BYTES`), which belongs to the reader that checks it (a module
of this layer, which may not import this one).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import KernelgapError

#: Share of the machine's memory one build or model may plan to use.
MEMORY_FRACTION = 0.5

#: Most features per head of a model (the largest rank any experiment trains is 256).
MAX_RANK = 1 << 20

#: Most steps of one training phase (the recipes use 10³–10⁴; a step takes at least ~1 ms).
MAX_STEPS = 10**7
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

_CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory() -> int:
    """Bytes of memory this process may use: physical memory, or a lower cgroup limit."""
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
    """The most bytes a build or a model may plan to allocate: ``MEMORY_FRACTION`` of the machine."""
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
    """Refuse a rank above :data:`MAX_RANK`."""
    if rank > MAX_RANK:
        raise error(f"{where} must be ≤ {MAX_RANK:,} features per head, got {rank:,}")
