"""δ is an exact Fraction of any size from the command line to the certificate: tiny,
within 10⁻⁴⁰⁰ of 1/2, with numerators and denominators of thousands of digits; and every
bad ``--delta`` is one line (docs/theory.md, "Exactness")."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from kernelgap.errors import KernelgapError
from kernelgap.rationals import frac_str, int_from_digits, int_str, parse_delta
from kernelgap.task import ProductFamily, build_family
from kernelgap.task.codes import hadamard_code
from kernelgap.task.families.witness import chain_candidate
from kernelgap.theory.certificate import certify
from kernelgap.theory.pair_bounds import log_fraction, log_rho, min_gap, rho

HALF = Fraction(1, 2)
TINY = Fraction(1, 10**19)
NEAR_HALF = HALF - Fraction(1, 10**30)


def witness_expected(delta: Fraction) -> tuple[Fraction, int]:
    """The witness family (16 queries, every ε = ρ(6, δ)): Σε² and the trace rank."""
    eps = rho(6, delta)
    total = 240 * eps**2
    bound = Fraction(256) / (16 + total)
    return total, (math.floor(bound) + 1 if delta == HALF else math.ceil(bound))


@pytest.mark.parametrize(
    "text",
    [
        "1/10000000000000000000",
        "1/" + "1" + "0" * 60,
        "1e-40",
        "49999999999999999999/100000000000000000000",
        "0.4999999999999999999999999999999",
    ],
)
def test_cli_certifies_the_witness_at_any_delta(cli, text):
    code, out, err = cli("certify", "--family", "witness", "--delta", text, "--json")
    assert code == 0, err
    data = json.loads(out)
    delta = parse_delta(text)
    total, trace_rank = witness_expected(delta)
    assert data["delta"] == frac_str(delta) and Fraction(data["delta"]) == delta
    assert Fraction(data["sum_eps2"]) == total and data["bounds"]["trace"]["rank"] == trace_rank
    assert data["certified_rank"] == 16 and Fraction(data["weakest_pair"]["eps"]) == rho(6, delta)
    assert Fraction(data["bounds"]["radon"]["max_product"]) == rho(6, delta) ** 2


def test_thousands_of_digits_survive_parsing_and_printing():
    delta = Fraction(1, 10**5000 + 7)  # beyond Python's 4300-digit int/str guard
    assert parse_delta(frac_str(delta)) == delta
    cert = certify(build_family("hadamard", m=12, n=4), frac_str(delta))
    data = cert.to_json()
    assert (
        Fraction(int_from_digits(data["sum_eps2"].split("/")[0]), int_from_digits(data["sum_eps2"].split("/")[1]))
        == cert.sum_eps2
    )
    assert cert.certified_rank == 4 and cert.radon.max_product == rho(3, delta) ** 2
    for value in (0, 7, -12345, 10**4299, 10**4300 + 1, -(3**20000), 2**60000 - 1):
        assert int_from_digits(int_str(abs(value))) == abs(value)
        assert int_str(value).lstrip("-") == int_str(abs(value))
    assert int_str(10**5000) == "1" + "0" * 5000


def _chain_product(m: int = 16, n: int = 5, levels=(1, 2, 3)) -> ProductFamily:
    """Hadamard rows as queries, complements as good candidates, and for each query chain
    candidates at overlaps ``levels`` (gaps of 1: what ρ is largest on)."""
    code = hadamard_code(m)[:n]
    chains = [chain_candidate(x.copy(), s) for x in code for s in levels]
    tokens, inv = np.unique(
        np.concatenate([code, 1 - code, np.array(chains).reshape(-1, m)]), axis=0, return_inverse=True
    )
    inv = inv.reshape(-1)
    return ProductFamily(tokens, inv[:n], inv[n:], 1, list(zip(inv[:n].tolist(), inv[n : 2 * n].tolist())))


def comparable(cert) -> dict:
    data = cert.to_json()
    data.pop("seconds")
    data["bounds"]["radon"].pop("seconds")
    return data


@pytest.mark.parametrize(
    "delta",
    [
        HALF,
        TINY,
        Fraction(1, 10**400),
        NEAR_HALF,
        HALF - Fraction(1, 10**400),
        Fraction(10**50 - 1, 2 * 10**50 + 3),
        Fraction(1, 3),
    ],
)
def test_product_and_sequences_agree_at_extreme_deltas(delta):
    """ρ(1, δ) ≈ 10⁴⁰⁰ near 1/2 (beyond floats), ε ≈ 10⁻⁴⁰⁰ for tiny δ (below them): both
    certificate paths stay exact and agree."""
    family = _chain_product()
    product = certify(family, delta)
    assert comparable(product) == comparable(certify(family.expand(), delta))
    assert product.delta == delta and product.certified_rank >= 1


def test_delta_edge_values_give_the_expected_certificates():
    family = build_family("hadamard", m=12, n=5)  # bad overlap 3: ε = ρ(3, δ)
    for delta in (TINY, Fraction(1, 10**400)):
        cert = certify(family, delta)
        assert cert.radon.max_product == rho(3, delta) ** 2 and cert.certified_rank == 5
        assert cert.sum_eps2 == 20 * rho(3, delta) ** 2 and not cert.strict
    # gap 3 against 2δ just under 1: ρ = 2δ/(3 − 2δ) just under 1/2, every product just under 1/4
    cert = certify(family, HALF - Fraction(1, 10**400))
    assert cert.radon.max_product < Fraction(1, 4) and cert.certified_rank == 5


def test_log_rho_is_accurate_for_any_delta():
    deltas = [
        HALF,
        Fraction(1, 3),
        TINY,
        Fraction(1, 10**400),
        NEAR_HALF,
        HALF - Fraction(1, 10**400),
        Fraction(3**200, 2 * 3**200 + 1),
        Fraction(7, 10**300),
    ]
    gaps = np.arange(0, 200)
    for delta in deltas:
        got = log_rho(gaps, delta)
        for g, value in zip(gaps.tolist(), got.tolist()):
            if g < min_gap(delta):
                assert value == math.inf
            else:
                exact = log_fraction(rho(g, delta))
                assert abs(value - exact) <= 1e-13 * max(1.0, abs(exact)), (delta, g)
    assert min_gap(HALF) == 2 and min_gap(NEAR_HALF) == 1 and min_gap(TINY) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("0", "lie in (0, 1/2]"),
        ("-1/3", "lie in (0, 1/2]"),
        ("3/4", "lie in (0, 1/2]"),
        ("1", "lie in (0, 1/2]"),
        ("abc", "rational like"),
        ("1/0", "rational like"),
        ("", "rational like"),
        ("1/" + "0" * 5000, "rational like"),
        ("nan", "rational like"),
        ("inf", "rational like"),
        ("1e-99999999", "exponent"),
        ("1" + "0" * 6000, "lie in (0, 1/2]"),
        ("1.5/2", "rational like"),
    ],
)
def test_bad_delta_is_one_line(cli, text, message):
    code, out, err = cli("certify", "--family", "hadamard", "-p", "m=8", "-p", "n=3", "--delta", text)
    assert code == 2 and out == "" and err.startswith("error: delta") and message in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 200
    with pytest.raises(KernelgapError):
        parse_delta(text)


def test_parse_delta_forms():
    assert parse_delta("2/5") == parse_delta(" 2 / 5 ") == parse_delta("+0.4") == Fraction(2, 5)
    assert parse_delta("1e-30") == Fraction(1, 10**30) and parse_delta("5E-1") == HALF
    assert parse_delta(".25") == parse_delta(Fraction(1, 4)) == Fraction(1, 4)
    assert parse_delta("1/" + "9" * 5000) == Fraction(1, int("9" * 4000) * 10**1000 + int("9" * 1000))
    for bad in (0, Fraction(3, 5), float("nan"), None, [1]):
        with pytest.raises(KernelgapError):
            parse_delta(bad)
