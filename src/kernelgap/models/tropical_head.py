"""The head of a min-plus table, built as an ordinary ``table`` kernel in log space and scored
on every sequence of the cube (docs/theory.md, "The tropical wall").

With integer tables ``p`` (queries) and ``q`` (keys) of rank r, ``log φ_Q(x)_k = p_xk·log t``
and ``log φ_K(z)_k = q_kz·log t`` (the weights ``t^{p+q}`` would overflow; the model sums them
with logsumexp), ``v(z) = z``, readout ``<x, y>`` plus a constant bias b.  The key map is the
same at every position, so the query's own token is one more key, at level ``|x|``: on the
cube it is one of the query's candidates and the table orders it like any other.

**The choice of t** (at a length N, every position scored; m the largest overlap gap):

* a ``strict`` table (every gap ≥ 1 raises T by ≥ 1), bias 0: relative to a slot at the
  target, each of the other N − 1 slots weighs at most ``r·t`` and adds its gap ≤ m, so the
  error is at most ``(N − 1)·m·r·t``; ``t = δ/(2(N − 1)·m·r)`` keeps it ≤ δ/2;
* an ``upper`` table (gap ≥ 2 raises T by ≥ 1, gap 1 by ≥ 0) at δ = 1/2: the slots one
  above the target weigh at most r times a target slot, a share
  ``f ≤ (N − 1)r/((N − 1)r + 1)``; the higher ones add ``h ≤ (N − 1)·m·r·t``; with bias
  ``b = −1/2 + η``, ``η = 1/(4((N − 1)r + 1))`` and ``t = η/((N − 1)·m·r)`` the error
  ``f + h − 1/2 + η`` lies in ``[−1/2 + η, 1/2 − 2η]``: at most ``1/2 − η``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..task.families.exhaustive import all_tokens
from .constructions import table_model
from .devices import resolve_device
from .verify import check_exhaustive


def head_parameters(mode: str, rank: int, m: int, length: int, delta: Fraction) -> tuple[float, Fraction, Fraction]:
    """``(log t, bias, error bound)`` for a table of ``mode`` and ``rank`` at length N (module
    docstring); the bound is exact arithmetic on the chosen t's stated value."""
    slots = length - 1
    if mode == "strict":
        t = Fraction(delta) / (2 * slots * max(m, 1) * rank)
        return math.log(t), Fraction(0), slots * max(m, 1) * rank * t
    if mode != "upper":
        raise ValueError(f"a head is built from a strict or upper table, not {mode!r}")
    eta = Fraction(1, 4 * (slots * rank + 1))
    t = eta / (slots * max(m, 1) * rank)
    return math.log(t), eta - Fraction(1, 2), Fraction(1, 2) - eta


def cube_head(p_tokens: list[list[int]], q_tokens: list[list[int]], m: int, log_t: float, bias: float):
    """The head of integer tables on every token of ``{0,1}^m`` (ids as ``all_tokens``)."""
    return table_head(p_tokens, q_tokens, all_tokens(m), 3, log_t, bias)


def table_head(p_tokens, q_tokens, vocab, length: int, log_t: float, bias: float):
    """The head of integer tables on the tokens ``vocab`` (``p_tokens[t]``: token t's query
    row; ``q_tokens[k][t]``: its key entry), for sequences of ``length``."""
    q_log = torch.tensor(p_tokens, dtype=torch.float64) * log_t
    k_log = torch.tensor(q_tokens, dtype=torch.float64).T * log_t
    model = table_model(vocab, length, q_log, k_log, torch.float64, check=False)
    with torch.no_grad():
        model.readout.bias.bias.fill_(float(bias))
    return model


def score_cube_head(p_tokens, q_tokens, m: int, mode: str, length: int, delta: Fraction = Fraction(2, 5)) -> dict:
    """The head of the tables, t and bias chosen for ``length``, on every sequence of that
    length over ``{0,1}^m`` (every position scored): its max error beside the stated bound."""
    rank = len(q_tokens)
    log_t, bias, bound = head_parameters(mode, rank, m, length, Fraction(delta))
    model = cube_head(p_tokens, q_tokens, m, log_t, float(bias))
    res = check_exhaustive(model, m, length, resolve_device("cpu"))
    return {
        "length": length,
        "rank": rank,
        "log_t": log_t,
        "bias": str(bias),
        "error_bound": str(bound),
        "sequences": res["sequences"],
        "max_error": res["max_error"],
        "exact": bool(res["max_error"] < 0.5),
        "within_bound": bool(res["max_error"] <= float(bound) + 1e-9),
    }


def score_product_head(family, order, mode: str, p_tokens, q_tokens, delta: Fraction = Fraction(1, 2)) -> dict:
    """The head of tables found for a product family (``order``: its product order family;
    ``p_tokens[j]`` the j-th query's row), scored by the exact worst case over the family."""
    from .worst_case import family_worst_case

    rank = len(q_tokens)
    rows = [[0] * rank for _ in order.tokens]
    for j, x in enumerate(order.queries):
        rows[x] = list(p_tokens[j])
    log_t, bias, bound = head_parameters(mode, rank, family.m, family.length, Fraction(delta))
    model = table_head(rows, q_tokens, family.tokens, family.length, log_t, float(bias))
    worst = family_worst_case(model, family).to_json()
    return {"rank": rank, "length": family.length, "bias": str(bias), "error_bound": str(bound), **worst}
