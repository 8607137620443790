"""A family as text (what ``kernelgap family`` prints once it has written one)."""

from __future__ import annotations

from .family import count_text


def written_lines(payload: dict) -> list[str]:
    """The family file written: where, its sequence count and its matched queries."""
    return [
        f"wrote {payload['out']}: {count_text(payload['sequences'])} sequences, {payload['matching']} matched queries"
    ]
