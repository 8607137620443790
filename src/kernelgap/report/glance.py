"""Whether a page can be read at a glance: every paragraph and table cell of a ``report.html``
or a Markdown page (``docs/results.md``) measured in characters of text, and those over the
limits listed (:data:`PARAGRAPH_LIMIT`, :data:`CELL_LIMIT`)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import NamedTuple

#: The most characters of text in one paragraph (a ``<p>``, a list item, a Markdown paragraph).
PARAGRAPH_LIMIT = 600
#: The most characters of text in one table cell.
CELL_LIMIT = 300


class TooLong(NamedTuple):
    """One block over its limit: its kind (``paragraph`` or ``cell``), its length, its start."""

    kind: str
    length: int
    start: str

    def __str__(self) -> str:
        return f"{self.kind} of {self.length} characters: {self.start[:80]}…"


#: The HTML elements measured, and what each counts as.
_BLOCKS = {"p": "paragraph", "li": "paragraph", "figcaption": "paragraph", "td": "cell", "th": "cell"}


class _Blocks(HTMLParser):
    """The text of every measured element, each piece of text counted in the innermost one
    (an item of a list inside a paragraph's details is its own paragraph)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, list[str]]] = []
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag in _BLOCKS:
            self.open.append((tag, []))

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                name, text = self.open.pop(i)
                self.found.append((_BLOCKS[name], " ".join("".join(text).split())))
                break

    def handle_data(self, data):
        if self.open:
            self.open[-1][1].append(data)


def html_blocks(page: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every paragraph and table cell of an HTML page (``<pre>`` not measured)."""
    parser = _Blocks()
    parser.feed(page)
    parser.close()
    return parser.found


def markdown_blocks(page: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every paragraph, list item and table cell of a Markdown page:
    a table row's cells split on unescaped ``|``, Markdown marks (``*``, `````) not counted."""
    out, para = [], []
    for line in [*page.splitlines(), ""]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            out += [("cell", _text(c)) for c in cells if not set(c.strip()) <= set("-:")]
        elif line.lstrip().startswith(("- ", "* ")) or not line.strip() or line.startswith("#"):
            if para:
                out.append(("paragraph", _text(" ".join(para))))
            para = [line.lstrip()[2:]] if line.lstrip().startswith(("- ", "* ")) else []
            continue
        else:
            para.append(line)
            continue
        if para:
            out.append(("paragraph", _text(" ".join(para))))
            para = []
    return out


def _text(markdown: str) -> str:
    return " ".join(markdown.replace("**", "").replace("`", "").replace("\\|", "|").split())


def too_long(blocks: list[tuple[str, str]], paragraph: int = PARAGRAPH_LIMIT, cell: int = CELL_LIMIT) -> list[TooLong]:
    """The blocks over their limit, longest first."""
    limit = {"paragraph": paragraph, "cell": cell}
    over = [TooLong(kind, len(text), text) for kind, text in blocks if len(text) > limit[kind]]
    return sorted(over, key=lambda t: -t.length)


class Item(NamedTuple):
    """One line of an outline: its text and the items under it."""

    text: str
    items: tuple[Item, ...] = ()


def split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets (``(…)``, ``[…]``, ``{…}``), pieces stripped."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            start = i + len(sep)
    return [p.strip() for p in [*out, text[start:]] if p.strip()]


def sentences(text: str) -> list[str]:
    """``text`` split into sentences: at a full stop outside brackets followed by a capital."""
    pieces = split_top(" ".join(text.split()), ". ")
    out: list[str] = []
    for p in pieces:
        if out and not p[:1].isupper() and not p[:1].isdigit():
            out[-1] += ". " + p  # not a sentence break ("e.g. x")
        else:
            out.append(p)
    return [p if p.endswith((".", ":", "!", "?")) else p + "." for p in out]


def outline(text: str, limit: int = PARAGRAPH_LIMIT) -> list[Item]:
    """``text`` as items of at most ``limit`` characters each: one per sentence, a longer sentence
    its head (up to a ``:``) over its enumeration (split at ``;``, then at ``,``)."""
    return [clause(s, limit) for s in sentences(text)]


def clause(text: str, limit: int = PARAGRAPH_LIMIT) -> Item:
    """One sentence as an item: whole where it fits ``limit``, else its head over its enumeration."""
    if len(text) <= limit:
        return Item(text)
    head, colon, body = text.partition(": ") if len(split_top(text, ": ")) > 1 else ("", "", text)
    if len(head) > limit or "(" in head and ")" not in head:
        head, colon, body = "", "", text
    for sep in ("; ", ", "):
        parts = split_top(body, sep)
        if len(parts) > 1:
            items = tuple(clause(p, limit) for p in parts)
            return Item(head + colon.rstrip(), items) if head else Item(items[0].text, items[0].items + items[1:])
    return Item(text)  # nothing to split at: kept whole


def short(text: str, limit: int) -> str:
    """``text`` itself where it fits ``limit``, else followed by ``…`` the most of its first
    sentences that fit, or of the clauses of its first (split at ``;``, then ``,``), or of its words."""
    if len(text) <= limit:
        return text
    first = sentences(text)[0].rstrip(".")
    for pieces, sep in ((sentences(text), " "), (split_top(first, "; "), "; "), (split_top(first, ", "), ", ")):
        kept = _fitting(pieces, sep, limit - 2)
        if kept:
            return kept + " …"
    return _fitting(text.split(), " ", limit - 2) + " …"


def _fitting(pieces: list[str], sep: str, limit: int) -> str:
    kept = ""
    for p in pieces:
        if len(kept) + len(sep) + len(p) > limit:
            break
        kept = f"{kept}{sep}{p}" if kept else p
    return kept
