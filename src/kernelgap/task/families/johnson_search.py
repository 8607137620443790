"""Larger distance-4 constant-weight codes by local search (docs/experiments.md, "Beyond
Graham–Sloane").

A code of weight w and distance ≥ 4 is an independent set of the Johnson graph ``J(m, w)``,
whose vertices are the weight-w words and whose edges join words at distance 2 (one position
swapped for another: ``w(m − w)`` neighbours a word).  Starting from a given code (``code4``
gives the cyclic Graham–Sloane class), an iterated local search in the manner of Andrade,
Resende and Werneck (Fast local search for the maximum independent set problem,
J. Heuristics 18 (2012) 525–547) grows it:

* *free* words (no neighbour in the code) are added;
* a *2-improvement* removes one code word u and adds two non-adjacent words whose only code
  neighbour was u;
* a *perturbation* forces one or two random words in (their code neighbours out), the local
  search runs again, and the result is kept unless it lost more than one word (or lost one,
  nine times in ten).

The search is seeded and runs a fixed number of perturbations, so a code is reproducible from
``(m, w, steps, seed)``.  Every step keeps the set independent; the caller checks the distance
of the result anyway.
"""

from __future__ import annotations

import random
from math import comb

import numpy as np

from .layer import layer_words


def johnson_neighbours(words: np.ndarray, m: int) -> np.ndarray:
    """``nb[i]``: the indices (into the descending ``words``, the whole layer) of the
    ``w(m − w)`` words at distance 2 from ``words[i]``."""
    ints = words.astype(np.uint64)
    order = np.argsort(ints)
    bits = ((ints[:, None] >> np.arange(m, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    w = int(bits[0].sum())
    ones = np.nonzero(bits)[1].reshape(len(words), w)
    zeros = np.nonzero(~bits)[1].reshape(len(words), m - w)
    flip = (np.uint64(1) << ones.astype(np.uint64))[:, :, None] | (np.uint64(1) << zeros.astype(np.uint64))[:, None, :]
    swapped = (ints[:, None, None] ^ flip).reshape(len(words), -1)
    return order[np.searchsorted(ints[order], swapped)]


class _Search:
    """The state of the local search: membership, how many code neighbours each word has."""

    def __init__(self, nb: np.ndarray, start: np.ndarray, seed: int) -> None:
        self.nb = nb
        self.rng = random.Random(seed)
        self.inside = np.zeros(len(nb), dtype=bool)
        self.tight = np.zeros(len(nb), dtype=np.int64)
        for v in start.tolist():
            self.insert(v)

    def insert(self, v: int) -> None:
        self.inside[v] = True
        self.tight[self.nb[v]] += 1

    def remove(self, v: int) -> None:
        self.inside[v] = False
        self.tight[self.nb[v]] -= 1

    def add_free(self, candidates) -> None:
        for v in candidates:
            if not self.inside[v] and self.tight[v] == 0:
                self.insert(int(v))

    def two_improve(self, u: int) -> bool:
        """Swap code word u for two non-adjacent words whose only code neighbour is u."""
        near = self.nb[u]
        only = near[(self.tight[near] == 1) & ~self.inside[near]].tolist()
        self.rng.shuffle(only)
        for i, a in enumerate(only):
            adjacent = set(self.nb[a].tolist())
            for b in only[i + 1 :]:
                if b not in adjacent:
                    self.remove(u)
                    self.insert(a)
                    self.insert(b)
                    self.add_free(near)
                    return True
        return False

    def local(self, queue: set[int]) -> None:
        """2-improvements from the code words in ``queue`` until none applies."""
        while queue:
            u = queue.pop()
            if self.inside[u] and self.two_improve(u):
                ring = np.unique(self.nb[self.nb[u]].ravel())
                queue.update(ring[self.inside[ring]].tolist())

    def perturb(self) -> set[int]:
        """Force one or two random outside words in; the code words near the change."""
        touched: set[int] = set()
        for _ in range(1 if self.rng.random() < 0.5 else 2):
            v = self.rng.randrange(len(self.nb))
            while self.inside[v]:
                v = self.rng.randrange(len(self.nb))
            out = self.nb[v][self.inside[self.nb[v]]].tolist()
            for x in out:
                self.remove(x)
            self.insert(v)
            for x in out:
                self.add_free(self.nb[x])
            touched.update(np.unique(self.nb[self.nb[v]].ravel()).tolist())
        return {t for t in touched if self.inside[t]}


def grow_code(m: int, w: int, start_words: np.ndarray, steps: int, seed: int) -> np.ndarray:
    """The largest code the search (module docstring) finds in ``steps`` perturbations from the
    packed ``start_words``, as packed words, descending."""
    words = layer_words(m, w, None, comb(m, w))
    nb = johnson_neighbours(words, m)
    order = np.argsort(words)
    start = order[np.searchsorted(words[order], start_words)]
    search = _Search(nb, start, seed)
    search.add_free(range(len(nb)))
    search.local(set(np.flatnonzero(search.inside).tolist()))
    best = search.inside.copy()
    for _ in range(steps):
        before = search.inside.copy()
        search.local(search.perturb())
        size, old = int(search.inside.sum()), int(before.sum())
        if size > best.sum():
            best = search.inside.copy()
        elif size < old - 1 or (size < old and search.rng.random() < 0.9):
            for v in np.flatnonzero(search.inside & ~before).tolist():
                search.remove(v)
            for v in np.flatnonzero(before & ~search.inside).tolist():
                search.insert(v)
    return np.sort(words[best])[::-1]
