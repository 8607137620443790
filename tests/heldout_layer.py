"""Held-out layer families written without kernelgap's code (numpy only): a Graham–Sloane class
of the weight-m/2 layer of {0,1}^m (the words whose support sums to a mod m, a code of minimum
distance 4; docs/theory.md, "Context length N") against its complements at length N, its bits,
queries and candidates shuffled with a seed (docs/experiments.md, "Training recipe").

``python tests/heldout_layer.py M N SEED OUT.json`` writes one as a product family file.
"""

from __future__ import annotations

import json
import sys
from itertools import combinations

import numpy as np


def class_words(m: int, seed: int) -> np.ndarray:
    """Every weight-m/2 word whose support sums to a (mod m), ``uint8 [n, m]``, with a drawn
    among the residues of the largest class."""
    supports = np.array(list(combinations(range(m), m // 2)))
    sums = supports.sum(axis=1) % m
    sizes = np.bincount(sums, minlength=m)
    rng = np.random.default_rng(seed)
    a = rng.choice(np.flatnonzero(sizes == sizes.max()))
    words = np.zeros((int(sizes[a]), m), dtype=np.uint8)
    np.put_along_axis(words, supports[sums == a], 1, axis=1)
    return words


def heldout_layer(m: int, length: int, seed: int) -> dict:
    """The family file (product layout): the class's words as queries, bits permuted and rows
    shuffled; each query's good candidate its complement, the candidates in another order."""
    rng = np.random.default_rng([seed, m, length])
    words = class_words(m, seed)[:, rng.permutation(m)]
    words = words[rng.permutation(len(words))]
    queries = ["".join(map(str, w)) for w in words]
    goods = ["".join(map(str, 1 - w)) for w in words]
    return {
        "m": m,
        "length": length,
        "query_position": 1,
        "name": f"heldout-layer-m{m}-N{length}-s{seed}",
        "queries": queries,
        "candidates": [goods[i] for i in rng.permutation(len(goods))],
        "matching": [[x, g] for x, g in zip(queries, goods)],
    }


if __name__ == "__main__":
    m, length, seed, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    with open(out, "w") as f:
        json.dump(heldout_layer(m, length, seed), f)
