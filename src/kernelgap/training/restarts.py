"""Fresh starts for runs that end not exact (``train.restarts``; docs/experiments.md, "Restarts").

A run with ``restarts = K`` that ends not exact trains again from a fresh initialisation
(:func:`restart_seed`: it depends only on the run's seed and the try's number), up to ``K``
times, stopping at the first exact try.  The run keeps its best try (exact, else the smallest
max error; the earlier on ties) in the checkpoint, and its record lists every try.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import torch

from ..task import EXACT_THRESHOLD
from .stack import MemberResult


def restart_seed(seed: int, attempt: int) -> int:
    """The member seed of try ``attempt`` (≥ 1) of a run of seed ``seed``: 63 bits of a hash."""
    digest = hashlib.sha256(f"kernelgap-restart:{seed}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def exact(result: MemberResult) -> bool:
    err = result.train.get("max_error")
    return result.status == "ok" and err is not None and err < EXACT_THRESHOLD


def _badness(result: MemberResult) -> tuple[int, float]:
    err = result.train.get("max_error")
    return (0 if exact(result) else 1, math.inf if err is None or result.status != "ok" else err)


def copy_member(source: torch.nn.Module, k: int, target: torch.nn.Module, e: int) -> None:
    """Member ``k`` of stacked model ``source`` into member ``e`` of ``target`` (same spec).
    Stacked tensors lead with ``members × s`` slots; a member's columns past its rank are zero
    and masked, so a member of a narrower ``source`` fills the leading block of its slots."""
    src, dst = source.state_dict(), target.state_dict()
    ns, nt = source.members, target.members
    with torch.no_grad():
        for name, t in dst.items():
            s = src[name]
            per = t.shape[0] // nt if t.dim() and t.shape[0] % nt == 0 else 0
            if per and s.shape[0] == ns * per and s.dim() == t.dim() and all(a <= b for a, b in zip(s.shape, t.shape)):
                block = t[e * per : (e + 1) * per]
                block.zero_()
                block[tuple(slice(0, a) for a in s.shape)].copy_(s[k * per : (k + 1) * per])
            elif s.shape != t.shape or not torch.equal(s, t):
                raise ValueError(f"cannot copy a member: {name} has no member axis and differs")


def restart_unfit(runs, model, results: list[MemberResult], train_again) -> list[MemberResult]:
    """``results`` of the members of ``model`` after their fresh starts; ``train_again(runs,
    seeds)`` gives ``(model, results)`` of a new stack, whose kept members are copied in."""
    best = list(results)
    tries = [[_try(runs[e].seed, r)] for e, r in enumerate(results)]
    for attempt in range(1, runs[0].train.restarts + 1):
        redo = [e for e, r in enumerate(best) if not exact(r)]
        if not redo:
            break
        seeds = [restart_seed(runs[e].seed, attempt) for e in redo]
        fresh, again = train_again([runs[e] for e in redo], seeds)
        for k, e in enumerate(redo):
            tries[e].append(_try(seeds[k], again[k]))
            if _badness(again[k]) < _badness(best[e]):
                best[e] = again[k]
                copy_member(fresh, k, model, e)
    return [
        dataclasses.replace(b, wall_time_s=sum(t["wall_time_s"] for t in ts), tries=ts) for b, ts in zip(best, tries)
    ]


def _try(seed: int, result: MemberResult) -> dict:
    return {"seed": seed, **result.summary(), "wall_time_s": result.wall_time_s}
