"""Certified rank against m for family series (PNG + JSON)."""

import json

import pytest

from kernelgap.errors import KernelgapError
from kernelgap.theory.bound_curve import bound_curve, parse_m_range, write_curve


def test_parse_m_range():
    assert parse_m_range("12..16") == [12, 13, 14, 15, 16]
    assert parse_m_range("12..24..4") == [12, 16, 20, 24]
    assert parse_m_range("12,24") == [12, 24]
    for bad in ("x", "12..", "1..1", "4..2"):
        with pytest.raises(KernelgapError):
            parse_m_range(bad)


def test_hadamard_curve_numbers():
    payload = bound_curve("hadamard", parse_m_range("20..28"), chain_step=4)
    assert [p["m"] for p in payload["points"]] == [20, 24] and 28 in payload["skipped_m"]
    p24 = payload["points"][1]
    assert (p24["queries"], p24["certified_direct"], p24["certified_chained"]) == (23, 13, 13)
    assert p24["positive_construction"] == 2**24 and p24["softmax_score_dim"] == 24


def test_chains_lift_the_curve():
    (p,) = bound_curve("hadamard", [48], chain_step=4)["points"]
    assert (p["certified_direct"], p["certified_chained"]) == (35, 45)


def test_write_png_and_json(tmp_path):
    payload = bound_curve("cw", [16, 24], queries=12)
    files = write_curve(payload, tmp_path)
    assert open(files["png"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    data = json.loads(open(files["json"]).read())
    assert [p["m"] for p in data["points"]] == [16, 24]
    assert all(p["certified_chained"] >= p["certified_direct"] >= 1 for p in data["points"])


def test_cli(cli, tmp_path):
    code, out, _ = cli("bound-curve", "--code", "hadamard", "--m", "12,24", "--out", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0 and [p["certified_direct"] for p in data["points"]] == [4, 13]
    assert (tmp_path / "bound-curve-hadamard.png").is_file()
    code, _, err = cli("bound-curve", "--code", "rs", "--m", "12")
    assert code == 2 and "--code" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("bound-curve", "--code", "hadamard", "--m", "28")
    assert code == 2 and "no m" in err
