"""Exhaustive verification of the constructions (docs/theory.md, "Constructions").

Each construction is evaluated on *all* ``2^{Nm}`` sequences of each length N over
``{0,1}^m``, every position scored, and compared with what the theory predicts:

* ``rank1`` (``α ≡ 1``, ``p = (2/N)Σ_j <x_i, x_j> − |x_i|``) has max error exactly
  ``m·max(N − 2, 0)/N``: exact for N ≤ 2, failing for N ≥ 3 (except m = 1, N = 3,
  where the error is 1/3);
* ``softmax`` and ``positive_2m`` (``β = ln(2(N − 1)) + 1`` of their own N) err by at
  most ``(N − 1)e^{−β} ≤ 1/(2e) < 1/2``: exact at every N.

"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np
import torch

from ..limits import DEFAULT_LENGTHS, MAX_VERIFY_PAIRS, check_size, check_verify  # noqa: F401 (theirs)
from ..task.families.exhaustive import all_tokens, iter_exhaustive_index
from ..task.family import ProductFamily
from ..task.minip import EXACT_THRESHOLD, MetricsAccumulator, targets, targets_from_index
from .constructions import CONSTRUCTIONS, build_construction
from .devices import resolve_device

#: (query, key) pairs evaluated per chunk (memory: a few float64 copies of them, ~100 MB).
CHUNK_PAIRS = 9 << 18
#: Sequences of a product family on which dense softmax's construction is checked (:func:`softmax_check`).
SOFTMAX_SAMPLES = 4096


def chunk_size(length: int) -> int:
    """Sequences per chunk at length N: ``CHUNK_PAIRS / N²`` (2^18 at N = 3)."""
    return max(1, CHUNK_PAIRS // (length * length))


def check_exhaustive(model, m: int, length: int, device: torch.device) -> dict:
    """Max error etc. of ``model`` on every sequence of ``length`` over ``{0,1}^m``."""
    model = model.to(device)
    tokens_np = all_tokens(m)
    tokens = torch.from_numpy(tokens_np).to(device, model.dtype)
    gram = (tokens @ tokens.T).round().long()
    acc = MetricsAccumulator()
    with torch.no_grad():
        tables = model.tables(tokens)
        for chunk in iter_exhaustive_index(m, length, chunk_size(length)):
            index = torch.from_numpy(chunk).to(device)
            pred = model.predict(tokens, index, tables=tables)[0]
            acc.update(pred, targets_from_index(gram, index))
    res = acc.result()
    return {"sequences": res.sequences, "max_error": res.max_error, "exact": res.exact}


def rank1_max_error(m: int, length: int) -> Fraction:
    """The rank-1 construction's max error over every sequence of length N: ``m·max(N − 2, 0)/N``.

    At a query x of weight w with overlaps ``s_j ≤ w`` and target ``t = min_j s_j``,
    ``p − t = (2/N)(w + Σ_{j≠i} s_j) − w − t`` lies in ``[−w(N − 2)/N, w(N − 2)/N]`` for
    N ≥ 2 (all others 0…0, resp. all 1…1 but one 0…0), and is 0 at N = 1; w = m attains it.
    """
    return Fraction(m * max(length - 2, 0), length)


def expected_exact(name: str, m: int, length: int) -> bool:
    """Whether the theory says ``name`` is exact on every sequence of length N (module docstring)."""
    if name == "rank1":
        return rank1_max_error(m, length) < Fraction(EXACT_THRESHOLD)
    return True


def verify_constructions(m: int, device: str = "cpu", lengths: Iterable[int] | None = DEFAULT_LENGTHS) -> dict:
    """Check every registered construction on every sequence of each length, against
    :func:`expected_exact`; ``as_expected`` is true when every outcome is the predicted one."""
    lengths = check_verify(m, lengths)
    dev = resolve_device(device)
    # every model is built before any is checked: a construction that refuses m (one line)
    # does so before minutes of checking
    models = {(name, n): build_construction(name, m, n) for name in CONSTRUCTIONS for n in lengths}
    checks = []
    for (name, n), model in models.items():
        res = check_exhaustive(model, m, n, dev)
        expected = expected_exact(name, m, n)
        checks.append(
            {"construction": name, "N": n, **res, "expected_exact": expected, "as_expected": res["exact"] == expected}
        )
    return {"m": m, "lengths": list(lengths), "checks": checks, "as_expected": all(c["as_expected"] for c in checks)}


def softmax_check(family: ProductFamily, samples: int = SOFTMAX_SAMPLES, seed: int = 0) -> dict:
    """Dense softmax's construction (q = −βx, k = z, β = ln 4 + 1) on random sequences of a
    length-3 product family: the max error at the query position over ``samples`` draws."""
    rng = np.random.default_rng(seed)
    q = rng.choice(family.queries, samples)
    a, b = rng.choice(family.candidates, samples), rng.choice(family.candidates, samples)
    columns = [a, b]
    columns.insert(family.query_position - 1, q)
    dense = torch.from_numpy(family.tokens[np.stack(columns, 1)]).double()
    pos = family.query_position - 1
    model = build_construction("softmax", family.m, 3)
    with torch.no_grad():
        err = (model(dense)[0, :, pos] - targets(dense)[:, pos]).abs()
    return {"sampled": samples, "max_error": float(err.max()), "exact": bool(err.max() < 0.5)}
