"""A report read at a glance: the length limits measured on HTML and Markdown, long prose turned
into a short lead over collapsed details, long table cells into notes, the headline screen."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.report.glance import (
    CELL_LIMIT,
    PARAGRAPH_LIMIT,
    Item,
    html_blocks,
    markdown_blocks,
    outline,
    sentences,
    short,
    split_top,
    too_long,
)
from kernelgap.report.html import Finding, findings, paragraph, table
from kernelgap.reproduction.render import markdown_prose, markdown_table

WORD = st.text(alphabet="abcdefghij0123456789=", min_size=1, max_size=12)
CLAUSE = st.lists(WORD, min_size=1, max_size=12).map(" ".join)
# an enumeration as the experiments write them: "Head: a, b (x, y); c, d. Next sentence."
ENUM = st.tuples(CLAUSE, st.lists(st.lists(CLAUSE, min_size=1, max_size=8), min_size=1, max_size=12)).map(
    lambda t: f"Lead {t[0]}: " + "; ".join(", ".join(c) + " (in, brackets)" for c in t[1])
)
PROSE = st.lists(ENUM, min_size=1, max_size=6).map(lambda s: ". ".join(s) + ".")


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9=]+", text)


def flat(items) -> list[str]:
    return [t for i in items for t in (i.text, *flat(i.items))]


def test_measures_paragraphs_items_captions_and_cells_each_by_its_own_text():
    page = (
        f"<p>{'a' * 601}</p><p>{'b' * 600}</p><ul><li>{'c' * 10}<ul><li>{'d' * 601}</li></ul></li></ul>"
        f"<figure><figcaption><span>{'e' * 700}</span></figcaption></figure>"
        f"<table><tr><th>x</th></tr><tr><td>{'f' * 301}</td><td>{'g' * 300}</td></tr></table><pre>{'h' * 9999}</pre>"
    )
    assert [(o.kind, o.length, o.start[0]) for o in too_long(html_blocks(page))] == [
        ("paragraph", 700, "e"),
        ("paragraph", 601, "a"),
        ("paragraph", 601, "d"),
        ("cell", 301, "f"),
    ]
    assert ("paragraph", "c" * 10) in html_blocks(page)  # the nested item is not counted in its parent


def test_markdown_blocks_are_paragraphs_list_items_and_cells():
    page = "\n".join(
        ["# Title", "", "one", "line two", "", "- item **one**", "  - nested `x`", "", "| a | b \\| c |", "|---|---|"]
    )
    assert markdown_blocks(page) == [
        ("paragraph", "one line two"),
        ("paragraph", "item one"),
        ("paragraph", "nested x"),
        ("cell", "a"),
        ("cell", "b | c"),
    ]
    assert too_long([("paragraph", "x" * 601), ("cell", "y" * 301), ("cell", "z" * 300)]) == [
        too_long([("paragraph", "x" * 601)])[0],
        too_long([("cell", "y" * 301)])[0],
    ]


def test_splits_outside_brackets_and_sentences_at_capitals():
    assert split_top("a (b; c); d [e; f]; g", "; ") == ["a (b; c)", "d [e; f]", "g"]
    assert sentences("At m = 8 r = 0.5. Then (x. y) more. e.g. not") == [
        "At m = 8 r = 0.5.",
        "Then (x. y) more. e.g. not.",
    ]


@settings(max_examples=40, deadline=None)
@given(PROSE)
def test_an_outline_keeps_every_word_in_order_and_no_item_over_the_limit(text):
    items = outline(text)
    assert words(" ".join(flat(items))) == words(text)
    assert all(len(t) <= PARAGRAPH_LIMIT for t in flat(items))
    assert all(isinstance(i, Item) for i in items)


@settings(max_examples=40, deadline=None)
@given(PROSE)
def test_long_prose_renders_within_the_limits_in_html_and_markdown(text):
    page = paragraph(text)
    assert too_long(html_blocks(page)) == []
    assert words(re.sub(r"<summary>\d+ more</summary>|<[^>]+>", " ", page)) == words(text)
    assert len(text) <= PARAGRAPH_LIMIT or "<details>" in page
    md = "\n".join(markdown_prose(text, "**T.** "))
    assert too_long(markdown_blocks(md)) == []
    assert words(re.sub(r"<summary>\d+ more</summary>|<[^>]+>|\*\*T\.\*\*", " ", md)) == words(text)


@settings(max_examples=40, deadline=None)
@given(PROSE, st.integers(40, CELL_LIMIT))
def test_a_long_cell_is_shortened_to_whole_sentences_and_given_in_full_below(text, limit):
    cut = short(text, limit)
    assert len(cut) <= limit and (cut == text or cut.endswith(" …"))
    html = table([{"q": "x", "note": text}], ["q", "note"])
    assert too_long(html_blocks(html)) == []
    if len(text) > CELL_LIMIT:
        assert "(note 1)</td>" in html and "Note 1." in html
        assert words(re.sub(r"<summary>\d+ more</summary>|<[^>]+>", " ", html.split("</table>")[1])) == words(
            "Note 1. " + text
        )
    md = "\n".join(markdown_table([{"q": "x", "note": text}], ["q", "note"], fit=True))
    assert too_long(markdown_blocks(md)) == []


def test_short_prose_and_cells_stay_as_they_were():
    assert paragraph("A short one.") == "<p>A short one.</p>"
    assert markdown_prose("A short one.", "**T.** ") == ["**T.** A short one."]
    assert table([{"a": "b"}]) == "<table><tr><th>a</th></tr><tr><td>b</td></tr></table>"


def test_the_headline_screen_says_firm_or_at_the_edge_for_each_finding():
    page = "".join(findings([Finding("Rank 1 fails at N = 3."), Finding("Exact from r = 16.", "2 of 3 seeds exact")]))
    assert "<li>Rank 1 fails at N = 3. <em>(firm)</em></li>" in page
    assert "<li>Exact from r = 16. <em>(at the edge: 2 of 3 seeds exact)</em></li>" in page
    assert findings([]) == []


def test_each_headline_finding_carries_its_number_and_reads_its_seeds():
    from kernelgap.experiments.bound_curve.experiment import headline as curve
    from kernelgap.experiments.context.experiment import headline as context
    from kernelgap.experiments.length.experiment import headline as length
    from kernelgap.experiments.ood.experiment import headline as ood
    from kernelgap.experiments.witness.experiment import headline as witness

    runs = [
        {"feature_map": fm, "rank": 16, "features": 16, "seed": k, "max_error": err}
        for fm, errs in (("table", [0.1, 0.2, 0.3]), ("mlp_exp", [0.1, 0.9, 0.2]))
        for k, err in enumerate(errs)
    ]
    w = {"witness": {"certified_rank": 16, "m": 24, "transition_rank": {"table": 16, "mlp_exp": 16}, "runs": runs}}
    assert witness(w) == [
        Finding("One kernel head needs r ≥ 16 on the witness family (certified, m = 24)."),
        Finding("Training is exact from r = 16 (mlp_exp, table; the paper: r = 32).", "mlp_exp: 2 of 3 seeds exact"),
    ]
    rows = [{"N": n, "rank": 1, "exact": n < 3, "source": "constructed"} for n in (1, 2, 3)]
    trained = [{"N": 3, "rank": 1, "exact": e, "source": "trained"} for e in (True, False)]
    assert length({"length": rows}) == [Finding("Rank 1 is exact up to N = 2 and fails at N = 3.")]
    assert length({"length": rows + trained})[0].edge == "N = 3: 1 of 2 trained seeds exact"
    scale = {"label": "n=4", "transition_rank": 8, "runs": [{"rank": 8, "test_exact_seq_acc": a} for a in (1.0, 0.5)]}
    assert ood({"ood": {"scales": [scale, {**scale, "transition_rank": None, "runs": []}]}}) == [
        Finding(
            "On unseen tokens the transition rank goes r = 8 → not run as the pool grows (the paper: 8 → 16 → 64).",
            "n=4: 1 of 2 seeds solve",
        )
    ]
    points = [{"m": 32, "certified": 9}, {"m": 96, "certified": 1280}]
    bc = {"bound_curve": {"code": "ladder", "points": points, "growth": {"log2_per_m": 0.1046}}}
    assert curve(bc) == [
        Finding("The certified rank grows as 2^(0.105·m) on ladder families (m = 32…96; at m = 96: r ≥ 1,280).")
    ]
    wall = [
        {"delta": "1/2", "m": m, "certified": c, "length": n, "ratio_to_positive": c / 2**m, "log2_rank_per_m": x}
        for m, c, n, x in ((8, 10, 5, 0.42), (16, 810, 31, 0.60), (18, 900, None, 0.5))
    ]
    assert context({"context": {"wall": wall}}) == [
        Finding(
            "At δ = 1/2, m = 16 the certificate reaches r = 810 from context N = 31 (log2 r / m = 0.60; the paper's limit: 1)."
        )
    ]


def test_the_series_headline_counts_families_and_names_where_seeds_disagree():
    from kernelgap.experiments.series.experiment import headline

    def fam(n, built, table_from, hits):
        runs = [{"rank": n, "exact": k < hits} for k in range(3)]
        trained = {"table": {"exact_from": table_from, "runs": runs}}
        return {
            "kind": "hadamard",
            "n": n,
            "certified_rank": n,
            "constructed_rank": built,
            "constructed_exact": True,
            "trained": trained,
        }

    series = [fam(4, 4, 4, 3), fam(8, 8, 8, 2), fam(12, 13, None, 0), {**fam(16, 16, 16, 3), "kind": "ladder"}]
    assert headline({"series": series}) == [
        Finding("The construction is exact at the certified rank on 2 of 3 Hadamard families (n = 4…12)."),
        Finding("Training is exact at the certified rank on 2 of 3 (table) of them.", "table: seeds disagree at n = 8"),
    ]
