"""``kernelgap family``: build a registered family, write it, and say so."""

from __future__ import annotations

from .family import count_json, count_text, sequence_count
from .family_file import save_family
from .registry import build_family, parse_params


def write_family(name: str, params: dict[str, str], out: str, overwrite: bool) -> dict:
    """Build the registered family ``name`` (``params``: its parameters as text), write it as a
    family file (:func:`~kernelgap.task.family_file.save_family`) and return what was written."""
    family = build_family(name, **parse_params(name, params))
    path = save_family(family, out, overwrite=overwrite)
    return {
        "family": family.name,
        "sequences": count_json(sequence_count(family)),
        "tokens": len(family.tokens),
        "m": family.m,
        "matching": len(family.matching),
        "out": str(path),
    }


def written_lines(payload: dict) -> list[str]:
    """The family file written: where, its sequence count and its matched queries."""
    return [
        f"wrote {payload['out']}: {count_text(payload['sequences'])} sequences, {payload['matching']} matched queries"
    ]
