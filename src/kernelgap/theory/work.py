"""Searches whose budget counts work, not seconds (docs/theory.md, "The chromatic certificate").

A certificate search (the Radon clique, the chromatic bounds) stops after a fixed amount of
*work* — search nodes, solver conflicts, LP iterations — so its answer is the same on a fast
machine, a slow one or a loaded one.  A wall-clock limit exists only as a guard against a
hang: when it is hit the search stops and the certificate says so (``guard_hit``), since only
then can the answer depend on the machine.

:func:`max_clique` is an exact maximum-clique search (branch and bound with a greedy
colouring bound, Tomita and Seki's MCQ) over graphs held as Python-int bitsets, counting one
node per call; every answer is a clique, checked, or a proof by exhaustion that none of the
asked size exists (within the node budget).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: Nodes of the exact clique searches of one certificate (each node: one greedy colouring of
#: the open set), unless told otherwise.
DEFAULT_NODES = 200_000
#: Seconds after which a search stops as a guard against a hang (reported as ``guard_hit``).
DEFAULT_GUARD_S = 600.0
#: The clock is read once per this many nodes.
CLOCK_EVERY = 256


class OutOfWork(Exception):
    """The node budget (or the hang guard) ran out."""


@dataclass
class Work:
    """A work budget shared by the searches of one certificate: ``nodes`` clique-search nodes,
    and a hang guard of ``guard_s`` seconds from creation (``None``: none)."""

    nodes: int = DEFAULT_NODES
    guard_s: float | None = DEFAULT_GUARD_S
    used: int = 0
    guard_hit: bool = False
    start: float = field(default_factory=time.monotonic)

    def tick(self) -> None:
        self.used += 1
        if self.used > self.nodes:
            raise OutOfWork
        if self.used % CLOCK_EVERY == 0 and self.guard_s is not None and time.monotonic() - self.start > self.guard_s:
            self.guard_hit = True
            raise OutOfWork


def bitsets(n: int, edges) -> list[int]:
    """Adjacency bitsets of an undirected graph on ``0..n − 1``."""
    adj = [0] * n
    for i, j in edges:
        adj[i] |= 1 << j
        adj[j] |= 1 << i
    return adj


def complement(adj: list[int]) -> list[int]:
    full = (1 << len(adj)) - 1
    return [full & ~a & ~(1 << v) for v, a in enumerate(adj)]


def _colour_sort(adj: list[int], open_: int) -> tuple[list[int], list[int]]:
    """A greedy colouring of the open set: vertices in colour order and each one's colour."""
    order, colours, colour, uncoloured = [], [], 0, open_
    while uncoloured:
        colour += 1
        free = uncoloured
        while free:
            v = (free & -free).bit_length() - 1
            free &= ~adj[v] & ~(1 << v)
            uncoloured &= ~(1 << v)
            order.append(v)
            colours.append(colour)
    return order, colours


def max_clique(adj: list[int], at_least: int, work: Work) -> list[int] | None:
    """A maximum clique if it has at least ``at_least`` vertices, ``[]`` if no clique of
    ``at_least`` vertices exists, ``None`` if the work ran out first (whatever was found is
    lost: the callers keep their greedy cliques)."""
    best: list[int] = []
    need = at_least

    def expand(chosen: list[int], open_: int) -> None:
        nonlocal best, need
        work.tick()
        order, colours = _colour_sort(adj, open_)
        for v, colour in zip(reversed(order), reversed(colours)):
            if len(chosen) + colour < need:
                return
            grown = chosen + [v]
            inner = open_ & adj[v]
            if inner:
                expand(grown, inner)
            elif len(grown) >= need:
                best, need = grown, len(grown) + 1
            open_ &= ~(1 << v)

    try:
        expand([], (1 << len(adj)) - 1)
    except OutOfWork:
        return None
    return sorted(best)
