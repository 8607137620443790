"""Exhaustive verification of the constructions (SPEC §3; issue #2).

Each construction is evaluated on *all* ``2^{Nm}`` sequences of length
N = 1, 2, 3 over ``{0,1}^m`` in chunks: its per-token tables are computed once
and every sequence costs a few scalar look-ups.
"""

from __future__ import annotations

import torch
from rich.console import Console
from rich.table import Table

from ..errors import KernelgapError
from ..task.families import all_tokens, iter_exhaustive_index
from ..task.minip import MetricsAccumulator, targets_from_index
from .constructions import CONSTRUCTIONS, build_construction

#: Exhaustive checking beyond this m would take hours (2^{3m} triples).
MAX_VERIFY_M = 9
CHUNK = 1 << 20


def resolve_device(device: str) -> torch.device:
    """A torch device, with a one-line error when it is unavailable."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise KernelgapError(f"unknown device {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KernelgapError("device 'cuda' requested but CUDA is not available")
    return dev


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


def render_verify(payload: dict) -> None:
    table = Table(title=f"Constructions on every sequence over {{0,1}}^{payload['m']}")
    for col in ("construction", "N", "sequences", "max error", "exact"):
        table.add_column(col, justify="right" if col not in ("construction",) else "left")
    for c in payload["checks"]:
        table.add_row(c["construction"], str(c["N"]), f"{c['sequences']:,}",
                      f"{c['max_error']:.6f}", "yes" if c["exact"] else "no")
    Console().print(table)


__all__ = ["check_exhaustive", "render_verify", "verify_constructions"]
