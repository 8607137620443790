"""Product families: the file layout, expansion, and the level-based certificate, which
must equal the certificate of the expanded sequences."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import FamilyError
from kernelgap.task import ProductFamily, build_family, load_family, save_family
from kernelgap.task.family_file import family_from_json
from kernelgap.theory.certificate import certify


def comparable(cert) -> dict:
    """A certificate's JSON without timings and the sequence count (which a product states
    without materialising)."""
    data = cert.to_json()
    data.pop("seconds")
    data["bounds"]["radon"].pop("seconds")
    return data


def words(m: int, values) -> list[str]:
    return ["".join("1" if v >> k & 1 else "0" for k in range(m)) for v in values]


@st.composite
def product_dicts(draw):
    m = draw(st.integers(3, 6))
    full = 2**m - 1
    w = st.integers(0, full)
    queries = sorted(set(draw(st.lists(w, min_size=1, max_size=3))))
    goods = [q ^ full if draw(st.integers(0, 3)) else draw(w) for q in queries]
    candidates = sorted(set(goods + draw(st.lists(w, max_size=4))))
    matching = [[a, b] for a, b in zip(words(m, queries), words(m, goods))]
    return {
        "m": m,
        "query_position": draw(st.integers(1, 3)),
        "queries": words(m, queries),
        "candidates": words(m, candidates),
        "matching": matching,
    }


def product_of(data: dict) -> ProductFamily:
    """The family ``data`` describes, through the file reader where its matching is consistent;
    otherwise the reader refuses it in one line (a good candidate above its query's least
    overlap) and the same family is built through the API, which keeps any matching."""
    try:
        return family_from_json(data)
    except FamilyError as exc:
        assert "least overlap" in str(exc) and "\n" not in str(exc)
    words_ = sorted(set(data["queries"] + data["candidates"]))
    tokens = np.array([[int(c) for c in w] for w in words_], dtype=np.uint8)
    ids = {w: i for i, w in enumerate(words_)}
    return ProductFamily(
        tokens,
        [ids[w] for w in data["queries"]],
        [ids[w] for w in data["candidates"]],
        data["query_position"],
        [(ids[q], ids[g]) for q, g in data["matching"]],
    )


@settings(max_examples=150, deadline=None)
@given(product_dicts(), st.sampled_from([Fraction(1, 2), Fraction(2, 5), Fraction(1, 4)]))
def test_product_certificate_equals_the_expanded_one(data, delta):
    family = product_of(data)
    assert isinstance(family, ProductFamily) and len(family) == len(family.queries) * len(family.candidates) ** 2
    expanded = family.expand()
    assert len(expanded) == len(family)
    try:
        product = comparable(certify(family, delta))
    except FamilyError as exc:
        with pytest.raises(FamilyError) as info:
            certify(expanded, delta)
        assert str(info.value) == str(exc)
        return
    assert product == comparable(certify(expanded, delta))


@pytest.mark.parametrize(
    "params", [{"m": 32, "n": 6, "rungs": 2, "step": 3}, {"m": 40, "n": 10}, {"m": 24, "n": 5, "rungs": 3, "step": 2}]
)
def test_small_ladders_certify_the_same_expanded(params):
    family = build_family("ladder", **params)
    assert comparable(certify(family)) == comparable(certify(family.expand()))


def test_ladder_family_structure():
    family = build_family("ladder", m=64, n=32, seed=3)
    tok = family.tokens.astype(int)
    q = tok[family.queries]
    assert (q.sum(1) == 32).all()
    gram = q @ q.T
    assert gram[~np.eye(len(q), dtype=bool)].max() <= 24  # overlap cap 3m/8
    for x, g in family.matching:
        assert tok[x] @ tok[g] == 0 and (tok[x] + tok[g] == 1).all()  # complement
    levels = tok[family.queries] @ tok[family.candidates].T
    assert family.meta["ladder"] == [4]  # rungs below the bad-overlap floor 32 − 24 = 8
    assert all(4 in row for row in levels)
    assert len(family.candidates) == 2 * 32


def test_file_round_trip_keeps_the_product(tmp_path):
    family = build_family("ladder", m=32, n=8)
    save_family(family, tmp_path / "f.json")
    data = json.loads((tmp_path / "f.json").read_text())
    assert {"queries", "candidates"} <= set(data) and "sequences" not in data
    back = load_family(tmp_path / "f.json")
    assert isinstance(back, ProductFamily)
    for a, b in ((back.tokens, family.tokens), (back.queries, family.queries), (back.candidates, family.candidates)):
        assert np.array_equal(a, b)
    assert back.matching == family.matching and back.query_position == 1


def test_expansion_refuses_huge_products():
    family = build_family("ladder", m=128, n=128)  # 128 · 512² sequences
    with pytest.raises(FamilyError, match="at most 4,194,304 are expanded"):
        family.expand()


BAD = [
    ({"queries": ["01"], "candidates": ["10"], "sequences": [["01"]]}, "not both"),
    (
        {"queries": [], "candidates": ["10"]},
        "queries: list should have at least 1 item after validation, not 0, got []",
    ),
    ({"queries": ["01"]}, "candidates: field required"),
    ({"queries": ["01"], "candidates": ["1x"]}, "candidates entry 0: '1x' has characters"),
    ({"queries": ["011"], "candidates": ["10"]}, "queries entry 0: '011' has length 3"),
    ({"queries": ["01"], "candidates": ["10"], "query_position": None}, "'query_position' must be an integer in 1..3"),
    ({"queries": ["01"], "candidates": ["10"], "matching": [["10", "10"]]}, "its query is not in 'queries'"),
    (
        {"queries": ["01"], "candidates": ["10"], "matching": [["01", "01"]]},
        "its good candidate is not in 'candidates'",
    ),
    ({"queries": ["01"], "candidates": [[1, 0]]}, "candidates.0: input should be a valid string, got [1, 0]"),
]


@pytest.mark.parametrize("extra, message", BAD)
def test_bad_product_files_give_one_line_errors(tmp_path, extra, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"m": 2, "query_position": 1, **extra}))
    with pytest.raises(FamilyError) as info:
        load_family(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_cli_ladder_family_then_certify(cli, tmp_path):
    path = tmp_path / "ladder.json"
    code, out, _ = cli("family", "ladder", "-p", "m=48", "-p", "n=32", "--out", str(path))
    assert code == 0 and "32 matched queries" in out
    code, out, _ = cli("certify", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and data["certified_rank"] == 32 and data["method"] == "radon"
    assert (
        len(data["bounds"]["radon"]["queries"]) == 32 and data["sequences"] == 32**3
    )  # no rung fits below the floor 6: 32 candidates


def test_certify_does_not_import_torch(tmp_path):
    """The certificate path stays light: loading a family file and certifying it never import torch."""
    family = build_family("hadamard", m=12)
    save_family(family, tmp_path / "h.json")
    code = (
        "import sys; from kernelgap.cli import main\n"
        "try:\n    main(['certify', sys.argv[1], '--json'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "h.json")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["certified_rank"] == 5


@pytest.mark.slow
def test_the_wall_at_m_128_certifies_4096_queries(tmp_path):
    """The acceptance family: 4096 queries × 16,384 candidates, every query certified."""
    family = build_family("ladder", m=128, n=4096)
    save_family(family, tmp_path / "L.json")
    cert = certify(load_family(tmp_path / "L.json"))
    assert cert.certified_rank == 4096 and cert.method == "radon" and cert.radon.exact_search
    assert cert.radon.max_product <= Fraction(1, 4095)
