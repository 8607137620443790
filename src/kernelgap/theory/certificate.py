"""The rank lower bound as an exact certificate for a concrete family (docs/theory.md).

For a family of sequences of length N ≥ 3, a query position and a tolerance
``0 < δ ≤ 1/2`` the certificate is a rank ``r₀`` such that every single-head normalized
nonnegative kernel model with max error ``≤ δ`` (``< 1/2`` at δ = 1/2) on the query position
needs ``r ≥ r₀`` features.  Three bounds are computed from the same pair bounds ε
(:mod:`.pair_bounds`) and the largest is certified: trace (:mod:`.trace`, any real B), Radon
(:mod:`.radon`) and chromatic (:mod:`.chromatic`), the last two using that the features are
nonnegative.  Every search counts work (:mod:`.work`); every dropped query and unbounded pair
is reported.

**At scale** (docs/theory.md, "The whole set by rule").  A product family with more than
:data:`DENSE_QUERIES` matching entries and of complement shape is certified without any
``n × n`` matrix: the Radon bound by rule from the least gap of its query code
(:mod:`.least_gap`).  When the rule certifies all n queries the trace bound is skipped (it
cannot exceed n); otherwise the first :data:`DENSE_QUERIES` entries, with their good
candidates as the only candidates, are certified as a sub-family with the pair matrices — every
sequence of it is one of the family's, so a model exact on the family is exact on it — and the
better of that and the rule is certified.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import FamilyError
from ..limits import DENSE_QUERIES
from ..rationals import frac_str, parse_delta
from ..task.family import (
    AnyFamily,
    Family,
    ProductFamily,
    bits_to_str,
    count_json,
    sequence_count,
    sorted_unique,
)
from .certificate_json import BoundsJson, CertificateJson, RadonJson, RuleJson, TraceJson, chromatic_json
from .chains import chain_pair_bounds, complete_quads
from .chromatic import ChromaticBound, chromatic_bound
from .least_gap import ComplementShape, LeastGap, complement_shape, least_gap
from .levels import level_pair_bounds
from .pair_bounds import REASONS, PairBounds, min_gap
from .radon import DEFAULT_BUDGET_S, RadonBound, radon_bound
from .trace import TraceBound, skipped_trace, trace_certificate
from .work import DEFAULT_GUARD_S, Work

#: Most distinct tokens of a sequence family (token-id keys must fit in int64).
MAX_TOKENS = 1 << 21
#: Radon members are listed by word up to this many; a larger clique (only ever one given by
#: rule) is described by its count instead.
LISTED_MEMBERS = 4096


# -- the certificate ------------------------------------------------------------------------


@dataclass
class Certificate:
    """A certified rank ``r₀`` for a family, with both bounds and their intermediate numbers."""

    family: str
    m: int
    sequences: int  # a Python int of any size (a product family's Q·C^(N−1))
    query_position: int  # 1-based
    delta: Fraction
    queries_total: int
    comparisons: int | None  # None: not counted (a certificate by rule; see comparisons_at_least)
    trace: TraceBound
    radon: RadonBound
    weakest_pair: dict | None
    unbounded_pairs: list[dict]
    dropped_queries: list[dict]
    radon_queries: list[str] | None  # None: too many to list (a clique by rule)
    seconds: float = 0.0
    length: int = 3
    comparisons_at_least: int | None = None  # a lower bound where ``comparisons`` is not counted (None)
    rule: LeastGap | None = None  # the least-gap rule, when it ran
    subfamily: dict | None = None  # the sub-family certified densely, when not the whole family
    family_queries: int | None = None  # the family's distinct queries at the position (None: as the entries)
    chromatic: ChromaticBound | None = None  # None: not tried (a certificate by rule)
    chromatic_queries: list[str] | None = None  # the words of the chromatic graph's vertices

    @property
    def chromatic_rank(self) -> int:
        return self.chromatic.rank if self.chromatic is not None else 0

    @property
    def certified_rank(self) -> int:
        return max(self.trace.rank, self.radon.rank, self.chromatic_rank)

    @property
    def method(self) -> str:
        """The bound that certifies the rank (Radon on a tie; chromatic only where it beats both)."""
        if self.chromatic_rank > max(self.trace.rank, self.radon.rank):
            return "chromatic"
        return "radon" if self.radon.rank >= self.trace.rank else "trace"

    # the trace bound's numbers, under the names certificates have always used
    queries = property(lambda self: len(self.trace.kept))
    kept = property(lambda self: self.trace.kept.tolist())
    bound = property(lambda self: self.trace.bound)
    sum_eps2 = property(lambda self: self.trace.sum_eps2)
    strict = property(lambda self: self.trace.strict)

    def to_json(self, limit: int = 50) -> dict:
        """JSON-ready dict (:class:`~.certificate_json.CertificateJson`); rationals as ``"p/q"``;
        long lists of problems cut to ``limit``.  A skipped trace bound gives None for its
        numbers and its reason in ``bounds.trace.skipped``; the Radon block is :meth:`_radon_json`."""
        t = self.trace
        done = t.skipped is None
        trace = TraceJson(
            rank=t.rank if done else None,
            bound=t.bound if done else None,
            sum_eps2=t.sum_eps2 if done else None,
            queries=len(t.kept) if done else None,
            skipped=t.skipped,
        )
        return CertificateJson(
            family=self.family,
            m=self.m,
            sequences=count_json(self.sequences),
            length=self.length,
            query_position=self.query_position,
            delta=self.delta,
            queries_total=self.queries_total,
            queries=trace.queries,
            sum_eps2=trace.sum_eps2,
            bound=trace.bound,
            bound_float=float(t.bound) if done else None,
            strict=t.strict if done else None,
            certified_rank=self.certified_rank,
            method=self.method,
            bounds=BoundsJson(
                trace=trace,
                radon=self._radon_json(),
                chromatic=chromatic_json(self.chromatic, self.chromatic_queries),
            ),
            comparisons=self.comparisons,
            comparisons_at_least=self.comparisons_at_least,
            rule=_rule_json(self.rule),
            subfamily=self.subfamily,
            weakest_pair=self.weakest_pair,
            unbounded_count=len(self.unbounded_pairs),
            unbounded_pairs=self.unbounded_pairs[:limit],
            dropped_count=len(self.dropped_queries),
            dropped_queries=self.dropped_queries[:limit],
            seconds=round(self.seconds, 4),
        ).model_dump()

    def _radon_json(self) -> RadonJson:
        """The Radon block of :meth:`to_json`: the members are ``"all"`` only when they are every
        one of the family's ``of`` distinct queries (every matching entry, and no query without
        one), else ``"first"`` (the first ``count`` entries, by rule) or ``"listed"``, with their
        words in ``queries`` up to :data:`LISTED_MEMBERS` (else None)."""
        r = self.radon
        count = len(r.members)
        of = self.queries_total if self.family_queries is None else self.family_queries
        return RadonJson(
            rank=r.rank,
            level=r.level,
            members="all" if count == self.queries_total == of else "first" if r.by_rule else "listed",
            count=count,
            of=of,
            queries=self.radon_queries,
            max_product=r.max_product,
            max_product_bound=r.max_product_bound,
            exact_search=r.exact_search,
            whole_set=r.whole_set,
            by_rule=r.by_rule,
            seconds=round(r.seconds, 4),
        )


def _rule_json(rule: LeastGap | None) -> RuleJson | None:
    if rule is None:
        return None
    return RuleJson(
        min_distance=rule.distance,
        min_distance_exact=rule.exact,
        least_gap=rule.gap,
        eps=rule.eps,
        product=rule.product,
        level=rule.level,
        rank=rule.rank,
        whole_set=rule.whole_set,
        dense_limit=DENSE_QUERIES,
    )


def check_family(family: AnyFamily) -> None:
    """The certificate's preconditions, the family validated again first (a list or array
    changed in place since it was built); a one-line :class:`FamilyError` otherwise."""
    family.validate()
    if family.length < 3:
        raise FamilyError(
            f"the certificate needs length-3 or longer sequences, family {family.name!r} has length {family.length}"
        )
    if not family.matching:
        raise FamilyError(f"family {family.name!r} has no matching (query, good candidate) pairs")
    if isinstance(family, Family) and len(family.tokens) >= MAX_TOKENS:
        raise FamilyError(
            f"family {family.name!r} has {len(family.tokens)} distinct tokens; at most 2^21 are supported"
        )


def _nothing_to_compare(family: AnyFamily, positions: list[int]) -> FamilyError:
    shown = positions if len(positions) <= 4 else positions[:3] + ["…"]
    if family.length == 3:
        need = "all four sequences (x; c, c), (x; c', c'), (x; c, c') and (x; c', c) (are the mixed orders missing?)"
    else:
        need = (
            f"the all-c and all-c' sequences and, for each of the {family.length - 1} candidate slots, "
            f"c in that slot and c' in all the others"
        )
    return FamilyError(
        f"family {family.name!r} has nothing to compare at query position "
        f"{' or '.join(map(str, shown))}: the certificate needs, for a query x and two "
        f"candidates c ≠ c', {need}"
    )


def certify(
    family: AnyFamily,
    delta: Fraction | str = Fraction(1, 2),
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    rule: bool | None = None,
) -> Certificate:
    """The certificate at the family's query position; with every position scored
    (``query_position`` None) each position gives a valid certificate: the best is kept.
    ``budget_s`` bounds the exact clique search of the Radon bound.  ``rule``: the least-gap
    rule for a complement-shaped product family (module docstring, "At scale") — None: above
    :data:`DENSE_QUERIES` entries; True: always (a :class:`FamilyError` if the family is not of
    complement shape); False: never."""
    start = time.perf_counter()
    delta = parse_delta(delta)
    check_family(family)
    if isinstance(family, ProductFamily):
        if len(family.candidates) < 2:
            raise _nothing_to_compare(family, [family.query_position])
        wanted = rule if rule is not None else len(family.matching) > DENSE_QUERIES
        shape = complement_shape(family) if wanted else None
        if rule and shape is None:
            raise FamilyError(
                f"family {family.name!r} is not of complement shape (queries of one weight, each good "
                f"candidate its query's complement, the candidates exactly the good ones): no least-gap rule"
            )
        if shape is not None:
            best = _rule_certificate(family, shape, delta, budget_s)
        else:
            best = _certificate(family, family.query_position, level_pair_bounds(family, delta), delta, budget_s)
    else:
        if rule:
            raise FamilyError(
                f"family {family.name!r} is a list of sequences: the least-gap rule needs a product family"
            )
        positions = [family.query_position] if family.query_position else list(range(1, family.length + 1))
        if not any(len(complete_quads(family, p - 1)[0]) for p in positions):
            raise _nothing_to_compare(family, positions)
        best = max(
            (certify_at(family, p - 1, delta, budget_s) for p in positions), key=lambda c: (c.certified_rank, c.bound)
        )
    best.seconds = time.perf_counter() - start
    return best


def _family_queries(family: AnyFamily, position: int) -> int:
    """The family's distinct queries at the 1-based ``position``: a product family's queries, or
    the tokens a sequence family holds there (what ``"members": "all"`` must cover)."""
    if isinstance(family, ProductFamily):
        return len(family.queries)
    return len(sorted_unique(family.index[:, position - 1]))


def first_entries(family: ProductFamily, count: int) -> ProductFamily:
    """The sub-family of the first ``count`` matching entries, their good candidates the only
    candidates (module docstring, "At scale"; tokens renumbered in order)."""
    pairs = np.array(family.matching[:count], dtype=np.int64).reshape(-1, 2)
    ids = sorted_unique(pairs.ravel())
    local = np.searchsorted(ids, pairs)
    return ProductFamily(
        family.tokens[ids],
        local[:, 0],
        local[:, 1],
        family.query_position,
        list(zip(local[:, 0].tolist(), local[:, 1].tolist())),
        f"{family.name}-first{count}",
        dict(family.meta),
        family.length,
    )


def _rule_certificate(family: ProductFamily, shape: ComplementShape, delta: Fraction, budget_s: float) -> Certificate:
    """The certificate at scale (module docstring, "At scale")."""
    start = time.monotonic()
    gap = least_gap(shape, delta, family.length)
    n, word = shape.n, _words(family)
    # every query's good level 0 against the n − 1 others' levels ≥ the least gap
    at_least = n * (n - 1) if gap.gap >= min_gap(delta) else 0
    radon = _rule_radon(gap, time.monotonic() - start)
    common = dict(
        family=family.name,
        m=family.m,
        sequences=sequence_count(family),
        query_position=family.query_position,
        delta=delta,
        queries_total=n,
        length=family.length,
        rule=gap,
        family_queries=len(family.queries),
    )
    if gap.whole_set:
        return Certificate(
            comparisons=None,
            comparisons_at_least=at_least,
            trace=skipped_trace(
                f"the rule certifies all {n:,} matching entries, which no bound exceeds: the trace bound "
                f"(a sum over all n² pairs) is not computed"
            ),
            radon=radon,
            weakest_pair=None if gap.pair is None or gap.eps is None else _pair_json(family, word, *gap.pair, gap.eps),
            unbounded_pairs=[],
            dropped_queries=[],
            radon_queries=_rule_members(radon, family, word),
            **common,
        )
    size = min(n, DENSE_QUERIES)
    sub = family if size == n else first_entries(family, size)
    dense = _certificate(sub, family.query_position, level_pair_bounds(sub, delta), delta, budget_s)
    use_rule = radon.rank > dense.radon.rank
    return Certificate(
        comparisons=dense.comparisons if size == n else None,
        comparisons_at_least=None if size == n else max(at_least, dense.comparisons),
        trace=dense.trace,
        radon=radon if use_rule else dense.radon,
        weakest_pair=dense.weakest_pair,
        unbounded_pairs=dense.unbounded_pairs,
        dropped_queries=dense.dropped_queries,
        radon_queries=_rule_members(radon, family, word) if use_rule else dense.radon_queries,
        chromatic=dense.chromatic,
        chromatic_queries=dense.chromatic_queries,
        subfamily=None if size == n else _subfamily(gap, size, n),
        **common,
    )


def _rule_radon(gap: LeastGap, seconds: float) -> RadonBound:
    """The Radon bound the least-gap rule gives: the first ``gap.rank`` entries."""
    return RadonBound(
        rank=gap.rank,
        members=range(gap.rank),
        level=gap.rank - 1,
        max_product=gap.product if gap.whole_set and gap.exact else None,
        exact_search=gap.whole_set,
        seconds=seconds,
        steps=[{"level": gap.rank - 1, "answer": True, "how": "rule", "clique": gap.rank}],
        whole_set=gap.whole_set,
        by_rule=True,
        max_product_bound=gap.product,
    )


def _rule_members(radon: RadonBound, family: ProductFamily, word) -> list[str] | None:
    """The words of a clique by rule, up to :data:`LISTED_MEMBERS` of them (else None)."""
    if radon.rank > LISTED_MEMBERS:
        return None
    return [word(family.matching[k][0]) for k in radon.members]


def _subfamily(gap: LeastGap, size: int, n: int) -> dict:
    """The ``subfamily`` field: the first ``size`` of the ``n`` entries, certified densely."""
    return {
        "queries": size,
        "of": n,
        "why": (
            f"the rule certifies {gap.rank:,} of the {n:,} queries; the first {size:,} entries, with their "
            f"good candidates as the only candidates, are certified with the pair matrices (trace and "
            f"Radon bounds): each of their sequences is one of the family's"
        ),
    }


def certify_at(family: Family, qpos: int, delta: Fraction, budget_s: float = DEFAULT_BUDGET_S) -> Certificate:
    """The certificate of a sequence family with the query at 0-based position ``qpos``."""
    return _certificate(family, qpos + 1, chain_pair_bounds(family, qpos, delta), delta, budget_s)


def _certificate(family: AnyFamily, position: int, bounds: PairBounds, delta: Fraction, budget_s: float) -> Certificate:
    trace = trace_certificate(bounds)
    guard = budget_s if budget_s else DEFAULT_GUARD_S
    radon = radon_bound(bounds, budget_s, Work(guard_s=guard) if budget_s else None)
    chromatic = chromatic_bound(bounds, max(trace.rank, radon.rank), Work(guard_s=guard))
    word = _words(family)
    match = family.matching
    bad = np.argwhere(bounds.reason != 0)
    return Certificate(
        family=family.name,
        m=family.m,
        sequences=sequence_count(family),
        query_position=position,
        delta=delta,
        queries_total=len(match),
        comparisons=bounds.comparisons,
        trace=trace,
        radon=radon,
        weakest_pair=_weakest(bounds, trace.kept, family, word),
        unbounded_pairs=[
            {"query": word(match[i][0]), "bad": word(match[j][1]), "reason": REASONS[int(bounds.reason[i, j])]}
            for i, j in bad[:1000].tolist()
        ],
        dropped_queries=[{"query": word(match[k][0]), "why": why} for k, why in trace.dropped],
        radon_queries=[word(match[k][0]) for k in radon.members],
        chromatic=chromatic,
        chromatic_queries=[word(match[k][0]) for k in chromatic.vertices],
        length=family.length,
        family_queries=_family_queries(family, position),
    )


def _words(family: AnyFamily):
    """A token's word, each computed once."""
    return functools.cache(lambda token: bits_to_str(family.tokens[token]))


def _weakest(bounds: PairBounds, kept: np.ndarray, family: AnyFamily, word) -> dict | None:
    """The kept pair with the largest ε (the one the trace bound is least sure of)."""
    if len(kept) < 2:
        return None
    eps2 = bounds.eps_squared()[np.ix_(kept, kept)]
    i, j = (kept[k] for k in np.unravel_index(np.argmax(eps2), eps2.shape))
    return _pair_json(family, word, i, j, bounds.values[bounds.eps_id[i, j]])


def _pair_json(family: AnyFamily, word, i: int, j: int, eps: Fraction) -> dict:
    """The ``weakest_pair`` field: entry i's query and good candidate, entry j's as the bad one."""
    (q, g), (_, b) = family.matching[i], family.matching[j]
    tok = family.tokens[[q, g, b]].astype(np.int64)
    return {
        "query": word(q),
        "good": word(g),
        "bad": word(b),
        "s_good": int(tok[0] @ tok[1]),
        "s_bad": int(tok[0] @ tok[2]),
        "eps": frac_str(eps),
    }
