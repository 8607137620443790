"""Family files at context length N: sequence lists of any length N ≥ 1 and any query position,
product files with a "length" key, through the loader and `kernelgap certify`; and the
per-sequence paths on product families too large for len()."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelgap.errors import FamilyError
from kernelgap.experiments.steps import constructed
from kernelgap.task import build_family
from kernelgap.task.constructions import query_tokens
from kernelgap.task.family import MAX_PRODUCT_LENGTH, Family, ProductFamily, bits_to_str, sequence_count
from kernelgap.task.family_file import family_from_json, family_to_json, load_family
from kernelgap.theory.certificate import certify

BASE = build_family("hadamard", m=8, n=4)  # 4 queries, each good candidate the others' bad one
WORDS = [bits_to_str(t) for t in BASE.tokens]
MATCHING = [(WORDS[q], WORDS[g]) for q, g in BASE.matching]
GOODS = [g for _, g in MATCHING]


def _with_query(x: str, cands: list[str], qpos: int) -> list[str]:
    return cands[: qpos - 1] + [x] + cands[qpos - 1 :]


def needed_sequences(n: int, qpos: int) -> list[tuple[tuple[str, str, str, str], list[str]]]:
    """``(kind, sequence)`` of every sequence a comparison ``g → b`` needs at length N: for each
    query x with good g and each other good b, the all-g, the all-b and, per candidate slot j,
    g at j and b in the others; kind is ``(x, b, "all-g" | "all-b" | "slot j")``."""
    out, seen = [], set()
    for x, g in MATCHING:
        for b in GOODS:
            if b == g:
                continue
            rows = [((x, b, "all-g", ""), [g] * (n - 1)), ((x, b, "all-b", ""), [b] * (n - 1))]
            rows += [((x, b, "slot", str(j)), [b] * j + [g] + [b] * (n - 2 - j)) for j in range(n - 1)]
            for kind, cands in rows:
                seq = _with_query(x, cands, qpos)
                if tuple(seq) not in seen:  # the all-g sequence serves every b of its query
                    seen.add(tuple(seq))
                    out.append((kind, seq))
    return out


def _seq_file(path, n, qpos, sequences, matching=MATCHING):
    path.write_text(
        json.dumps({"m": 8, "query_position": qpos, "sequences": sequences, "matching": [list(p) for p in matching]})
    )
    return str(path)


def _certify_json(cli, path) -> dict:
    code, out, err = cli("certify", path, "--json")
    assert code == 0, err
    return json.loads(out)


def _product(n: int, qpos: int) -> ProductFamily:
    goods = np.array(sorted(g for _, g in BASE.matching))
    return ProductFamily(BASE.tokens, query_tokens(BASE), goods, qpos, BASE.matching, "p", {}, n)


# -- sequence lists at length N --------------------------------------------------------------


@pytest.mark.parametrize("n,qpos", [(4, 1), (4, 4), (5, 3), (6, 6)])
def test_length_n_sequence_file_certifies_like_the_product(cli, tmp_path, n, qpos):
    seqs = [s for _, s in needed_sequences(n, qpos)]
    payload = _certify_json(cli, _seq_file(tmp_path / "f.json", n, qpos, seqs))
    want = certify(_product(n, qpos)).to_json()
    assert payload["length"] == n and payload["query_position"] == qpos and payload["sequences"] == len(seqs)
    assert payload["comparisons"] == want["comparisons"] == 4 * 3  # every ordered pair of goods, per query
    assert payload["certified_rank"] == want["certified_rank"] == 4
    assert payload["bounds"]["radon"]["max_product"] == want["bounds"]["radon"]["max_product"]


@pytest.mark.parametrize("n,qpos", [(4, 2), (5, 5)])
def test_each_missing_needed_sequence_drops_its_comparisons(cli, tmp_path, n, qpos):
    """Dropping the all-g sequence of a query loses its 3 comparisons g → b; dropping an all-b
    or a "g in slot j" sequence loses exactly that one comparison."""
    rows = needed_sequences(n, qpos)
    full = _certify_json(cli, _seq_file(tmp_path / "full.json", n, qpos, [s for _, s in rows]))["comparisons"]
    x0, g0 = MATCHING[0]
    b0 = next(b for b in GOODS if b != g0)
    tried = 0
    for k, (kind, _) in enumerate(rows):
        if kind[0] != x0 or (kind[2] != "all-g" and kind[1] != b0):
            continue
        tried += 1
        left = [s for i, (_, s) in enumerate(rows) if i != k]
        got = _certify_json(cli, _seq_file(tmp_path / f"drop{k}.json", n, qpos, left))["comparisons"]
        assert got == full - (3 if kind[2] == "all-g" else 1), kind
    assert tried == n + 1  # the N + 1 sequences of the comparison g0 → b0


def test_unneeded_sequences_do_not_count(cli, tmp_path):
    """In the whole product at N = 4, dropping a sequence that holds two candidates but not in
    the "one slot, all the others" shape (x; b, g, b′) changes nothing; dropping (x; g, b, b)
    loses one comparison."""
    fam = _product(4, 1).expand()
    words = [[WORDS[i] for i in row] for row in fam.index.tolist()]
    full = _certify_json(cli, _seq_file(tmp_path / "full.json", 4, 1, words))["comparisons"]
    x, g = MATCHING[0]
    b, b2 = [c for c in GOODS if c != g][:2]
    for drop, loss in (([x, b, g, b2], 0), ([x, g, b, b], 1)):
        left = [w for w in words if w != drop]
        assert len(left) == len(words) - 1
        assert _certify_json(cli, _seq_file(tmp_path / "d.json", 4, 1, left))["comparisons"] == full - loss


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_any_length_and_query_position_loads_and_round_trips(n):
    x, g = MATCHING[0]
    b = GOODS[1]
    for qpos in [None, *range(1, n + 1)]:
        at = 1 if qpos is None else qpos
        seqs = [_with_query(x, [g] * (n - 1), at), _with_query(x, [b] * (n - 1), at), [g] * n]
        matching = [[x, g]] if n > 1 else []
        fam = family_from_json({"m": 8, "query_position": qpos, "sequences": seqs, "matching": matching})
        assert isinstance(fam, Family) and fam.length == n and fam.query_position == qpos and len(fam) == 3
        again = family_from_json(json.loads(json.dumps(family_to_json(fam))))
        assert np.array_equal(again.index, fam.index) and again.query_position == qpos


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda d: d["sequences"][2].pop(), "sequence 2 has length 4, the first has 5"),
        (lambda d: d["sequences"][1].append(GOODS[0]), "sequence 1 has length 6, the first has 5"),
        (lambda d: d.update(query_position=0), "'query_position' must be an integer in 1..5 or null, got 0"),
        (lambda d: d.update(query_position=6), "'query_position' must be an integer in 1..5 or null, got 6"),
        (lambda d: d.update(query_position=-1), "in 1..5 or null, got -1"),
        (lambda d: d.update(query_position="2"), "in 1..5 or null, got '2'"),
        (lambda d: d.update(query_position=True), "in 1..5 or null, got True"),
        (lambda d: d.update(query_position=2.0), "in 1..5 or null, got 2.0"),
        (lambda d: d["sequences"].append([]), "sequences.64: list should have at least 1 item after validation, not 0"),
        (lambda d: d["sequences"][3].__setitem__(4, "0101"), "'0101' has length 4, expected m = 8"),
        (lambda d: d["sequences"][3].__setitem__(4, "0101010x"), "characters other than '0' and '1'"),
        (lambda d: d.update(query_position=2), "no sequence holds its query"),
    ],
)
def test_bad_length_n_sequence_file_is_one_line(cli, tmp_path, change, needle):
    data = {"m": 8, "query_position": 1, "sequences": [s for _, s in needed_sequences(5, 1)]}
    data["matching"] = [list(p) for p in MATCHING]
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, out, err = cli("certify", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: family file {path}") and needle in lines[0]
    assert "Traceback" not in out + err


@pytest.mark.parametrize("n", [1, 2])
def test_certify_refuses_short_sequences_in_one_line(cli, tmp_path, n):
    x, g = MATCHING[0]
    seqs = [_with_query(x, [g] * (n - 1), 1), [g] * n]
    code, _, err = cli("certify", _seq_file(tmp_path / "s.json", n, 1, seqs, []))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "length-3 or longer" in err


# -- product files with a length -------------------------------------------------------------


@pytest.mark.parametrize("n,qpos", [(4, 1), (5, 5), (8, 3)])
def test_product_file_with_length_loads_and_certifies(cli, tmp_path, n, qpos):
    prod = _product(n, qpos)
    data = family_to_json(prod)
    assert data["length"] == n
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    fam = load_family(path)
    assert isinstance(fam, ProductFamily) and fam.length == n and fam.query_position == qpos
    assert fam.sequence_count == 4 * 4 ** (n - 1)
    payload = _certify_json(cli, str(path))
    assert payload["length"] == n and payload["sequences"] == 4 * 4 ** (n - 1)
    expanded = [[WORDS[i] for i in row] for row in prod.expand().index.tolist()]
    listed = _certify_json(cli, _seq_file(tmp_path / "s.json", n, qpos, expanded))
    for key in ("certified_rank", "comparisons", "sequences", "length"):
        assert payload[key] == listed[key], key


def test_product_length_3_is_the_default_and_not_written():
    data = family_to_json(_product(3, 1))
    assert "length" not in data and family_from_json(data).length == 3


def test_product_file_at_the_longest_length_loads():
    data = {**family_to_json(_product(4, 1)), "length": MAX_PRODUCT_LENGTH, "query_position": MAX_PRODUCT_LENGTH}
    fam = family_from_json(data)
    assert fam.length == MAX_PRODUCT_LENGTH and sequence_count(fam) == 4 * 4 ** (MAX_PRODUCT_LENGTH - 1)


@pytest.mark.parametrize(
    "length,qpos,needle",
    [
        (2, 1, "length: input should be greater than or equal to 3, got 2"),
        (0, 1, "got 0"),
        (-4, 1, "got -4"),
        ("4", 1, "got '4'"),
        (True, 1, "got True"),
        (4.0, 1, "got 4.0"),
        (None, 1, "got None"),
        (MAX_PRODUCT_LENGTH + 1, 1, "got 65537"),
        (10**400, 1, "length: input should be less than or equal to 65536, got 1000"),
        (4, 5, "'query_position' must be an integer in 1..4, got 5"),
        (4, 0, "in 1..4, got 0"),
        (4, None, "in 1..4, got None"),
    ],
)
def test_bad_product_length_is_one_line(cli, tmp_path, length, qpos, needle):
    data = {**family_to_json(_product(4, 1)), "length": length, "query_position": qpos}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, out, err = cli("certify", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0] and len(lines[0]) < 300
    assert "Traceback" not in out + err


# -- product families too large for len() ----------------------------------------------------


def test_family_command_prints_a_count_past_len(cli, tmp_path):
    out_file = tmp_path / "layer.json"
    code, out, err = cli("family", "layer", "-p", "m=16", "-p", "length=31", "--out", str(out_file), "--json")
    assert code == 0, err
    payload = json.loads(out)
    fam = load_family(out_file)
    assert payload["sequences"] == sequence_count(fam) > sys.maxsize
    with pytest.raises(FamilyError, match="more than len"):
        len(fam)
    code, out, _ = cli("family", "layer", "-p", "m=16", "-p", "length=31", "--out", str(out_file), "--force")
    assert code == 0 and "about 10^" in out


def test_constructed_on_products_counts_without_len():
    huge = ProductFamily(BASE.tokens, query_tokens(BASE), np.arange(len(BASE.tokens)), 1, BASE.matching, "h", {}, 40)
    assert sequence_count(huge) > sys.maxsize
    assert constructed(huge) == {"rank": None, "sequences": sequence_count(huge), "max_error": None, "exact": False}
    small = constructed(_product(4, 2))
    assert small["sequences"] == 4 * 4**3 and small["exact"] and small["rank"] == 4


def test_the_length_4_example_of_docs_formats_certifies_one_comparison(cli, tmp_path):
    text = (Path(__file__).parents[1] / "docs" / "formats.md").read_text()
    example = next(b for b in re.findall(r"```json\n(.*?)```", text, re.S) if '"0111"' in b)
    data = json.loads(example)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(data))
    assert _certify_json(cli, str(path))["comparisons"] == 1
    data["sequences"].pop(2)  # c in the first slot, c' in the others
    path.write_text(json.dumps(data))
    code, _, err = cli("certify", str(path))
    assert code == 2 and "nothing to compare" in err and len(err.strip().splitlines()) == 1
