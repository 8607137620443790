"""Helpers shared by the report sections: number formatting, HTML pieces, seed majorities."""

from __future__ import annotations

import base64
import html
from collections import defaultdict
from pathlib import Path


def fmt(x, spec: str = ".2f") -> str:
    """``–`` for a missing value, floats with ``spec``, anything else as ``str``."""
    if x is None:
        return "–"
    return format(x, spec) if isinstance(x, float) else str(x)


def html_table(rows: list[dict], cols: list[str], cell=str) -> str:
    """An HTML table of ``rows`` (dicts) over ``cols``; ``cell`` turns a value into text."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(r.get(c)))}</td>" for c in cols) + "</tr>"
        for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def img_tag(path: Path) -> str:
    """A PNG embedded as a data URI (the report stays one self-contained file)."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{path.stem}" src="data:image/png;base64,{data}">'


def first_rank(rows: list[dict], ok, key: str = "rank", enough=lambda hits, seeds: hits * 2 > seeds) -> int | None:
    """Smallest ``key`` value at which ``enough(seeds satisfying ok, seeds)`` holds."""
    by = defaultdict(list)
    for r in rows:
        by[r[key]].append(bool(ok(r)))
    return next((k for k in sorted(by) if enough(sum(by[k]), len(by[k]))), None)


def majority_rank(rows: list[dict], ok, key: str = "rank") -> int | None:
    """Smallest ``key`` value at which a strict majority of seeds satisfy ``ok``."""
    return first_rank(rows, ok, key)


def all_seeds_rank(rows: list[dict], ok) -> int | None:
    """Smallest rank at which every seed satisfies ``ok``."""
    return first_rank(rows, ok, enough=lambda hits, seeds: hits == seeds)
