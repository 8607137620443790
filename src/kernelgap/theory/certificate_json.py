"""The JSON of a certificate (``kernelgap certify --json``, and what the experiments' steps
write), as models: :class:`CertificateJson` holds the fields in the order they are written,
each strictly typed; :meth:`~kernelgap.theory.certificate.Certificate.to_json` fills it in
(docs/formats.md, "Certificates")."""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict

from ..rationals import frac_str
from ..validation import Int, Number

#: A rational written exactly, as ``"p/q"`` (or ``"p"``); a :class:`Fraction` given is written so.
Rational = Annotated[str, BeforeValidator(lambda v: frac_str(v) if isinstance(v, Fraction) else v)]


class Written(BaseModel):
    """A JSON object kernelgap writes: exactly these keys, each strictly typed."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TraceJson(Written):
    """The trace bound: its rank, bound, ``Σ ε²`` and query count (``None`` where skipped, with why)."""

    rank: Int | None
    bound: Rational | None
    sum_eps2: Rational | None
    queries: Int | None
    skipped: str | None


class RadonJson(Written):
    """The Radon bound (:meth:`~.certificate.Certificate._radon_json`)."""

    rank: Int
    level: Int
    members: Literal["all", "first", "listed"]
    count: Int
    of: Int
    queries: list[str] | None
    max_product: Rational | None
    max_product_bound: Rational | None
    exact_search: bool
    whole_set: bool
    by_rule: bool
    seconds: Number


class ChromaticJson(Written):
    """The chromatic bound (:class:`~.chromatic.ChromaticBound`; no timing: the block is a
    function of the family alone); ``edges`` by position in ``queries``."""

    rank: Int
    level: Int
    method: Literal["independence", "fractional", "sat"] | None
    queries: list[str]
    edges: list[list[Int]]
    witness: dict[str, Any]
    exact_search: bool
    steps: list[dict[str, Any]]
    work: dict[str, Int]
    guard_hit: bool
    skipped: str | None


class BoundsJson(Written):
    """The bounds of a certificate (``chromatic`` None where it was not tried)."""

    trace: TraceJson
    radon: RadonJson
    chromatic: ChromaticJson | None


class RuleJson(Written):
    """The least-gap rule's numbers (a family of complement shape)."""

    min_distance: Int
    min_distance_exact: bool
    least_gap: Int
    eps: Rational | None
    product: Rational | None
    level: Int
    rank: Int
    whole_set: bool
    dense_limit: Int


class CertificateJson(Written):
    """A certified rank for a family at one query position, with both bounds, their
    intermediate numbers and the pairs that weaken them (lists cut to a limit, with counts)."""

    family: str
    m: Int
    sequences: Int | str
    length: Int
    query_position: Int
    delta: Rational
    queries_total: Int
    queries: Int | None
    sum_eps2: Rational | None
    bound: Rational | None
    bound_float: Number | None
    strict: bool | None
    certified_rank: Int
    method: Literal["radon", "trace", "chromatic"]
    bounds: BoundsJson
    comparisons: Int | None
    comparisons_at_least: Int | None
    rule: RuleJson | None
    subfamily: dict[str, Any] | None
    weakest_pair: dict[str, Any] | None
    unbounded_count: Int
    unbounded_pairs: list[dict[str, Any]]
    dropped_count: Int
    dropped_queries: list[dict[str, Any]]
    seconds: Number


def _plain(value):
    """Witness values as JSON: rationals as ``"p/q"``, lists element by element."""
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def chromatic_json(bound, queries: list[str] | None) -> ChromaticJson | None:
    """The ``bounds.chromatic`` block of a :class:`~.chromatic.ChromaticBound` (None: not tried)."""
    if bound is None:
        return None
    return ChromaticJson(
        rank=bound.rank,
        level=bound.level,
        method=bound.method,
        queries=list(queries or []),
        edges=[list(e) for e in bound.edges],
        witness={k: _plain(v) for k, v in bound.witness.items()},
        exact_search=bound.exact_search,
        steps=bound.steps,
        work=bound.work,
        guard_hit=bound.guard_hit,
        skipped=bound.skipped,
    )
