"""Past the pair ceiling, closed: on the m = 6 middle layer (its 20 triples as good
candidates, queries their complements) at δ = 1/2 and context length N = 7, the chromatic
certificate proves 6 features, more than any pair certificate at m = 6 can (4, the exhaustive
maximum); min-plus tables of rank 6 order every query's candidates as δ = 1/2 needs (so an
exact head of rank 6 exists at every N), rank 5 cannot (so no head of rank 5 is exact once
N ≥ 7); and the table map trained at 6 is exact while at 5 it is not (docs/theory.md, "The
chromatic certificate" and "The tropical wall").
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from kernelgap.models.tropical_head import score_product_head
from kernelgap.task import build_family
from kernelgap.theory.ceiling import exhaustive_pair_maximum
from kernelgap.theory.certificate import certify
from kernelgap.theory.tropical import expand_table, integer_table, product_order_family, recheck, reduce_family
from kernelgap.theory.tropical_solve import solve_z3

HALF = Fraction(1, 2)


@pytest.fixture(scope="module")
def layer():
    return build_family("layer", m=6, distance=2, length=7)


def test_the_certificate_passes_every_pair_certificate(layer):
    cert = certify(layer, delta=HALF)
    assert cert.certified_rank == 6 and cert.method == "chromatic"
    assert exhaustive_pair_maximum(6, 2) == 4 < cert.certified_rank


def test_rank_six_tables_exist_and_rank_five_do_not(layer):
    order = product_order_family(layer)
    lower = solve_z3(reduce_family(order, "lower"), 5)
    assert lower.status == "unsat"  # at N = 7 the chromatic certificate above proves it independently
    problem = reduce_family(order, "upper")
    upper = solve_z3(problem, 6)
    assert upper.status == "sat"
    p_tokens, q_tokens = expand_table(order, problem, *integer_table(upper.p, upper.q))
    assert recheck(order, "upper", p_tokens, q_tokens) == []  # every query, every pair, in integers
    head = score_product_head(layer, order, "upper", p_tokens, q_tokens)
    assert head["max_error"] < 0.5 and head["max_error"] <= float(Fraction(head["error_bound"])) + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize(("rank", "exact"), [(6, True), (5, False)])
def test_the_table_map_trains_exact_at_the_certificate_and_never_below(rank, exact):
    """As `kernelgap train --family layer -p m=6 -p distance=2 -p length=7 --feature-map table
    --rank R --seed 0 --prune-from 1` trains it (examples/beyond_pairs_m6.toml: exact at 6 on 6 of
    8 seeds, at 5 on none)."""
    from kernelgap.training import train_runs
    from kernelgap.training.command_line import command_line_run

    given = {"kind": "kernel", "feature_map": "table", "rank": rank, "seed": 0, "prune_from": 1.0}
    run = command_line_run("layer", ["m=6", "distance=2", "length=7"], given)
    (result,) = train_runs([run])
    assert (result.train["max_error"] < 0.5) is exact, result.train
