"""The certificate under fuzzing: random and adversarial family files (both layouts) go
through ``load_family`` + ``certify`` and through ``kernelgap certify``.

* it never crashes: the only exception is a one-line :class:`KernelgapError`;
* it never certifies more than a brute-force re-derivation (every chain of
  comparisons enumerated, every subset of matched queries tried for both the
  trace and the Radon bound), and its Radon bound equals the brute-force one;
* malformed files are rejected with a message naming the problem.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgap.errors import KernelgapError
from kernelgap.task.family_file import family_from_json, load_family
from kernelgap.theory.certificate import certify
from kernelgap.theory.radon import exact_level

HALF = Fraction(1, 2)
DELTAS = [HALF, Fraction(2, 5), Fraction(1, 3), Fraction(1, 4), Fraction(1, 10)]


def word(bits: int, m: int) -> str:
    return "".join("1" if bits >> k & 1 else "0" for k in range(m))


@st.composite
def family_dicts(draw):
    """Valid family files: a few queries, goods (often complements), extra candidates,
    a random share of every (x; a, b) dropped, sometimes duplicated rows."""
    m = draw(st.integers(1, 7))
    full = 2**m - 1
    w = st.integers(0, full)
    queries = draw(st.lists(w, min_size=1, max_size=4))
    goods = [q ^ full if draw(st.integers(0, 3)) else draw(w) for q in queries]
    cands = sorted(set(goods + draw(st.lists(w, max_size=3))))
    qpos = draw(st.sampled_from([None, 1, 2, 3]))
    drop = draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.3, 0.7]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    at = qpos or draw(st.integers(1, 3))  # where the queries sit (scored anywhere when None)
    rows = []
    for q in sorted(set(queries)):
        for a, b in itertools.product(cands, repeat=2):
            if rng.random() >= drop:
                row = [a, b]
                row.insert(at - 1, q)
                rows.append(row)
    if not rows:
        rows = [[queries[0], goods[0], goods[0]]]
    if draw(st.booleans()):
        rows += rows[: draw(st.integers(0, 3))]  # duplicated sequences
    # a family refuses a query matched twice and a pair that never meets (query at a scored
    # position, good candidate elsewhere in the same sequence): keep each query's first such entry
    scored = [qpos - 1] if qpos else [0, 1, 2]
    meets = {(r[p], r[o]) for r in rows for p in scored for o in range(3) if o != p}
    first: dict[int, int] = {}
    for q, g in zip(queries, goods):
        if (q, g) in meets:
            first.setdefault(q, g)
    matching = [[word(q, m), word(g, m)] for q, g in first.items()]
    return {"m": m, "query_position": qpos, "sequences": [[word(t, m) for t in r] for r in rows], "matching": matching}


def brute_certified_rank(family, delta: Fraction) -> tuple[int, int]:
    """Best ranks the trace and the Radon certificates could claim, by exhaustive enumeration."""
    tok = family.tokens.astype(int)
    positions = [family.query_position] if family.query_position else [1, 2, 3]
    best, best_radon = 0, 1
    for pos in positions:
        q0 = pos - 1
        others = [p for p in range(3) if p != q0]
        seqs = {(r[q0], r[others[0]], r[others[1]]) for r in family.index.tolist()}

        def ratio(x, src, dst):
            s = lambda c: int(tok[x] @ tok[c])  # noqa: E731
            out = []

            def walk(c, prod):
                if c == dst:
                    out.append(prod)
                for d in range(len(tok)):
                    gap = s(d) - s(c)
                    if gap > 2 * delta and {(x, c, d), (x, d, c), (x, c, c), (x, d, d)} <= seqs:
                        walk(d, prod * (2 * delta) / (gap - 2 * delta))

            walk(src, Fraction(1))
            return min(out) if out else None

        match = family.matching
        n = len(match)
        eps = [[ratio(match[i][0], match[i][1], match[j][1]) for j in range(n)] for i in range(n)]
        nonempty = lambda i, j: match[i][1] != match[j][1]  # noqa: E731
        anchored = [
            any(
                nonempty(i, j) and eps[i][j] is not None and (eps[i][j] < 1 or (delta == HALF and eps[i][j] <= 1))
                for j in range(n)
            )
            for i in range(n)
        ]
        usable = lambda i, j: eps[i][j] is not None and eps[i][j] <= 1 and anchored[i]  # noqa: E731
        for size in range(1, n + 1):
            for subset in itertools.combinations(range(n), size):
                pairs = [(i, j) for i in subset for j in subset if i != j]
                if not all(usable(i, j) for i, j in pairs):
                    continue
                bound = Fraction(size * size) / (size + sum((eps[i][j] ** 2 for i, j in pairs), Fraction(0)))
                strict = delta == HALF and any(nonempty(i, j) for i, j in pairs)
                best = max(best, math.floor(bound) + 1 if strict else math.ceil(bound))
                if size > 1:  # Radon: every pair's product at the level, strict if either bound is
                    level = min(
                        exact_level(eps[i][j] * eps[j][i], delta == HALF and nonempty(i, j), n) for i, j in pairs
                    )
                    if level >= 1:
                        best_radon = max(best_radon, min(level, size - 1) + 1)
    return best, best_radon


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(family_dicts(), st.sampled_from(DELTAS))
def test_random_families_never_crash_nor_overclaim(data, delta):
    try:
        family = family_from_json(data)
        cert = certify(family, delta)
    except KernelgapError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return
    trace, radon = brute_certified_rank(family, delta)
    assert cert.radon.rank == radon and cert.radon.exact_search
    assert 0 <= cert.trace.rank <= trace
    assert cert.certified_rank == max(cert.trace.rank, radon) <= max(len(family.matching), 1)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.sampled_from([0.5, 1.0, -2.5, 3.0, 1e300, float("nan"), float("inf")])
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=12,
)


@st.composite
def adversarial_files(draw):
    """Valid files with one part broken, random JSON, and random bytes."""
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "json", "bytes", "deep"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    if kind == "deep":
        depth = draw(st.integers(1, 5000))
        return ("[" * depth + "]" * depth).encode()
    data = draw(family_dicts())
    if draw(st.booleans()):
        return json.dumps(_mutated_product(draw, data)).encode()
    target = draw(st.sampled_from(["m", "query_position", "sequences", "matching", "row", "bits", "drop"]))
    if target == "drop":
        data.pop(draw(st.sampled_from(["m", "sequences"])))
    elif target == "row":
        k = draw(st.integers(0, len(data["sequences"]) - 1))
        data["sequences"][k] = draw(JSON | st.lists(st.text("01x", max_size=7), max_size=4))
    elif target == "bits":
        k = draw(st.integers(0, len(data["sequences"]) - 1))
        data["sequences"][k][0] = draw(st.text("01 2", max_size=8))
    else:
        data[target] = draw(JSON)
    return json.dumps(data).encode()


def _mutated_product(draw, data: dict) -> dict:
    """The product layout of a valid family (its queries and candidates) with one part broken."""
    qpos = data["query_position"] or 1
    rows = data["sequences"]
    product = {
        "m": data["m"],
        "query_position": qpos,
        "queries": sorted({r[qpos - 1] for r in rows}),
        "candidates": sorted({t for r in rows for k, t in enumerate(r) if k != qpos - 1}),
        "matching": data["matching"],
    }
    target = draw(st.sampled_from(["m", "query_position", "queries", "candidates", "matching", "bits", "drop", "both"]))
    if target == "drop":
        product.pop(draw(st.sampled_from(["m", "queries", "candidates"])))
    elif target == "both":
        product["sequences"] = rows
    elif target == "bits":
        key = draw(st.sampled_from(["queries", "candidates"]))
        product[key][0] = draw(st.text("01 2", max_size=8))
    else:
        product[target] = draw(JSON)
    return product


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_files(), st.sampled_from(DELTAS))
def test_adversarial_files_are_rejected_with_one_line(raw, delta):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "family.json"
        path.write_bytes(raw)
        try:
            family = load_family(path)
            certify(family, delta)
        except KernelgapError as exc:
            message = str(exc)
            assert message and "\n" not in message and len(message) < 2000
            assert any(w in message for w in ("family", "delta", "sequence", "queries", "candidates")), message


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    st.one_of(adversarial_files(), family_dicts().map(lambda d: json.dumps(d).encode())),
    st.sampled_from(["1/2", "2/5", "0", "3/4", "x", "1/0", "0.25"]),
)
def test_cli_certify_exits_0_or_2_with_one_line(cli, raw, delta):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "family.json"
        path.write_bytes(raw)
        code, out, err = cli("certify", str(path), "--delta", delta, "--json")
    assert code in (0, 2) and "Traceback" not in out + err
    if code == 0:
        assert json.loads(out)["certified_rank"] >= 0 and err == ""
    else:
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
