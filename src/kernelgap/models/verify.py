"""Exhaustive verification of the constructions (docs/theory.md, "Constructions").

Each construction is evaluated on *all* ``2^{Nm}`` sequences of length
N = 1, 2, 3 over ``{0,1}^m`` in chunks: its per-token tables are computed once
and every sequence costs a few scalar look-ups.
"""

from __future__ import annotations

import torch

from ..errors import KernelgapError
from ..task.exhaustive import all_tokens, iter_exhaustive_index
from ..task.minip import MetricsAccumulator, targets_from_index
from .constructions import CONSTRUCTIONS, build_construction
from .devices import resolve_device

#: Exhaustive checking beyond this m would take hours (2^{3m} triples).
MAX_VERIFY_M = 9
CHUNK = 1 << 20


def check_exhaustive(model, m: int, length: int, device: torch.device) -> dict:
    """Max error etc. of ``model`` on every sequence of ``length`` over ``{0,1}^m``."""
    model = model.to(device)
    tokens_np = all_tokens(m)
    tokens = torch.from_numpy(tokens_np).to(device, model.dtype)
    gram = (tokens @ tokens.T).round().long()
    acc = MetricsAccumulator()
    with torch.no_grad():
        tables = model.tables(tokens)
        for chunk in iter_exhaustive_index(m, length, CHUNK):
            index = torch.from_numpy(chunk).to(device)
            pred = model.predict(tokens, index, tables=tables)[0]
            acc.update(pred, targets_from_index(gram, index))
    res = acc.result()
    return {"sequences": res.sequences, "max_error": res.max_error, "exact": res.exact}


def verify_constructions(m: int, device: str = "cpu", lengths=(1, 2, 3)) -> dict:
    """Check every registered construction on every sequence of each length."""
    if m < 1:
        raise KernelgapError(f"--m must be ≥ 1, got {m}")
    if m > MAX_VERIFY_M:
        raise KernelgapError(
            f"--m {m} is too large for exhaustive checking (2^{3 * m} triples); use m ≤ {MAX_VERIFY_M}"
        )
    dev = resolve_device(device)
    checks = []
    for name in CONSTRUCTIONS:
        for n in lengths:
            model = build_construction(name, m, n)
            checks.append({"construction": name, "N": n, **check_exhaustive(model, m, n, dev)})
    return {"m": m, "checks": checks}


__all__ = ["check_exhaustive", "verify_constructions"]
