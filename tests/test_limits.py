"""Sizes that cannot be built or trained are refused before anything is allocated: family
parameters out of range, builds whose memory estimate exceeds the limit of
``kernelgap.limits``, ranks above ``MAX_RANK``, models whose parameters do not fit, and
codes larger than their Johnson bound.  Through the CLI each gives one stderr line
``error: …``, exit status 2, no traceback, within seconds, and leaves the folder as it
was (hashed before and after)."""

from __future__ import annotations

import re
import subprocess
import tracemalloc
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import FamilyError, KernelgapError
from kernelgap.limits import MAX_RANK, check_memory, format_bytes, memory_limit
from kernelgap.models import KernelSpec, SoftmaxSpec
from kernelgap.models.build import check_model
from kernelgap.task import FAMILIES, build_family
from kernelgap.task.codes import check_constant_weight, greedy_constant_weight, johnson_bound, random_constant_weight
from kernelgap.task.registry import MEMORY, check_params, family_parameters, memory_estimate, parameter_schemas
from param_schema import bounds, choices
from test_bad_input import KERNELGAP, _check, tree_digest

SWEEP = """
name = "limits"
[family]
name = "{family}"
params = {params}
[model]
feature_map = "table"
{model}
[train]
mse_steps = 2
max_steps = 2
[grid]
model.rank = {ranks}
"""

TOMLS = {
    "seed-negative.toml": ("ladder", "{m = 16, n = 4, seed = -1}", ""),
    "seed-float.toml": ("ladder", "{m = 16, n = 4, seed = 1.5}", ""),
    "n-huge.toml": ("ladder", "{n = 1000000000000}", ""),
    "heads-huge.toml": ("exhaustive", "{m = 2, length = 2}", "heads = 1000000000000"),
    "hidden-huge.toml": ("exhaustive", "{m = 2, length = 2}", 'readout = "mlp"\nhidden = 1000000000000'),
    "rank-huge.toml": ("exhaustive", "{m = 2, length = 2}", "", "[1, 1000000000000]"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = tmp_path_factory.mktemp("limits")
    for name, (family, params, model, *ranks) in TOMLS.items():
        (w / name).write_text(
            SWEEP.format(family=family, params=params, model=model, ranks=ranks[0] if ranks else "[1, 2]")
        )
    (w / "empty").mkdir()
    return w


RANK_LIMIT = f"must be ≤ {MAX_RANK:,} features per head"
CASES = [  # (id, argv with {w}, text the one error line must contain)
    (
        "family-seed",
        ["family", "ladder", "-p", "seed=-1", "--out", "{w}/x.json"],
        "seed: input should be greater than or equal to 0, got -1",
    ),
    (
        "certify-seed",
        ["certify", "--family", "ladder", "-p", "seed=-1"],
        "seed: input should be greater than or equal to 0, got -1",
    ),
    (
        "train-seed",
        ["train", "--family", "ladder", "-p", "seed=-1"],
        "seed: input should be greater than or equal to 0, got -1",
    ),
    (
        "sweep-seed",
        ["sweep", "{w}/seed-negative.toml", "--out", "{w}/new"],
        "family.params: family 'ladder': seed: input should be greater than or equal to 0, got -1",
    ),
    (
        "sweep-seed-into-empty",
        ["sweep", "{w}/seed-negative.toml", "--out", "{w}/empty"],
        "seed: input should be greater than or equal to 0",
    ),
    (
        "sweep-seed-float",
        ["sweep", "{w}/seed-float.toml", "--out", "{w}/new"],
        "seed: input should be a valid integer, got 1.5",
    ),
    (
        "family-cw-seed",
        ["family", "cw", "-p", "seed=-3", "--out", "{w}/x.json"],
        "seed: input should be greater than or equal to 0",
    ),
    (
        "family-pool-fraction",
        ["family", "pool", "-p", "test_fraction=nan", "--out", "{w}/x.json"],
        "test_fraction: input should be a finite number, got nan",
    ),
    (
        "family-ood-split",
        ["family", "ood", "-p", "split=dev", "--out", "{w}/x.json"],
        "split: input should be 'train' or 'test', got 'dev'",
    ),
    (
        "family-n-huge",
        ["family", "ladder", "-p", "n=1000000000000", "--out", "{w}/x.json"],
        "(n=1,000,000,000,000) needs about",
    ),
    (
        "family-m-huge",
        ["family", "ladder", "-p", "m=1000000000", "--out", "{w}/x.json"],
        "(m=1,000,000,000) needs about",
    ),
    ("family-hadamard-huge", ["family", "hadamard", "-p", "m=100000000", "--out", "{w}/x.json"], "needs about"),
    (
        "family-exhaustive-huge",
        ["family", "exhaustive", "-p", "m=1000000000000", "--out", "{w}/x.json"],
        "at most 2^24 are materialised",
    ),
    ("family-pool-huge", ["family", "pool", "-p", "m=1000000000000", "--out", "{w}/x.json"], "needs about"),
    ("family-ood-huge", ["family", "ood", "-p", "n=1000000000000", "--out", "{w}/x.json"], "needs about"),
    ("certify-n-huge", ["certify", "--family", "ladder", "-p", "n=1000000000000"], "needs about"),
    ("sweep-n-huge", ["sweep", "{w}/n-huge.toml", "--out", "{w}/new"], "needs about"),
    ("train-rank-huge", ["train", "--family", "witness", "--rank", "1000000000000"], RANK_LIMIT),
    ("train-rank-2-70", ["train", "--family", "witness", "--rank", str(2**70)], RANK_LIMIT),
    ("sweep-rank-huge", ["sweep", "{w}/rank-huge.toml", "--out", "{w}/new"], RANK_LIMIT),
    ("sweep-heads-huge", ["sweep", "{w}/heads-huge.toml", "--out", "{w}/new"], "parameters (4 bytes each) needs about"),
    ("sweep-hidden-huge", ["sweep", "{w}/hidden-huge.toml", "--out", "{w}/empty"], "parameters (4 bytes each)"),
    (
        "family-impossible-code",
        ["family", "ladder", "-p", "m=16", "-p", "n=100000", "--out", "{w}/x.json"],
        "the Johnson bound allows at most 1,396",
    ),
    (
        "certify-impossible-code",
        ["certify", "--family", "ladder", "-p", "m=16", "-p", "n=100000"],
        "the Johnson bound allows at most 1,396",
    ),
    (
        "family-impossible-cw",
        ["family", "cw", "-p", "m=16", "-p", "max_overlap=3", "-p", "n=100", "--out", "{w}/x.json"],
        "Johnson bound allows at most 16",
    ),
    (
        "family-rung-above-weight",
        ["family", "ladder", "-p", "m=16", "-p", "n=4", "-p", "rungs=5", "--out", "{w}/x.json"],
        "a rung at overlap 20 needs weight > 20",
    ),
]


@pytest.mark.timeout(120)  # building what these ask for would take hours or all memory
@pytest.mark.parametrize("case, args, needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_before_allocating(world, cli, case, args, needle):
    before = tree_digest(world)
    code, out, err = cli(*[a.replace("{w}", str(world)) for a in args])
    _check(code, out, err, needle)
    assert tree_digest(world) == before, "files changed (or new ones appeared)"


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["family", "ladder", "-p", "seed=-1", "--out", "x.json"],
            "seed: input should be greater than or equal to 0, got -1",
        ),
        (["family", "ladder", "-p", "m=16", "-p", "n=100000", "--out", "x.json"], "at most 1,396"),
        (["train", "--family", "witness", "--rank", str(2**70)], RANK_LIMIT),
    ],
    ids=["seed", "impossible-code", "rank-2-70"],
)
def test_refused_through_the_console_script(tmp_path, args, needle):
    proc = subprocess.run([KERNELGAP, *args], capture_output=True, text=True, cwd=tmp_path)
    _check(proc.returncode, proc.stdout, proc.stderr, needle)
    assert not any(tmp_path.iterdir())


# -- the registry: every family's parameters, in one place -------------------------------


def _constrained():
    """``(family, parameter, a value its declared range or choices refuse)`` for every bound
    and every choice list of every registered family."""
    for name in sorted(FAMILIES):
        for key, field in parameter_schemas(name).items():
            if choices(field):
                yield name, key, "no-such-choice"
            b = bounds(field)
            for side, bad in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):
                if side in b:
                    yield name, key, b[side] + bad


@pytest.mark.parametrize("name, key, bad", list(_constrained()), ids=[f"{n}.{k}={b}" for n, k, b in _constrained()])
def test_every_declared_range_and_choice_is_enforced(name, key, bad):
    with pytest.raises(
        FamilyError, match=re.escape(f"family '{name}': {key}: input should be ") + ".*, got " + re.escape(repr(bad))
    ):
        check_params(name, {key: bad})


def test_every_seed_and_size_is_declared():
    """Seeds are ≥ 0 and counts ≥ 1 (or 0/−1 where that means a default) in every family."""
    for name in FAMILIES:
        fields = parameter_schemas(name)
        for key in ("seed", "m", "n", "length", "pool_size", "sequences", "queries_per_class"):
            if key in fields:
                assert "ge" in bounds(fields[key]), (name, key)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_types_are_checked_and_defaults_pass(name):
    full = check_params(name, {})
    if name in MEMORY:
        assert 0 < memory_estimate(name, full) <= memory_limit()
    for key in family_parameters(name):
        for bad in ([1], True, "1"):
            with pytest.raises(
                FamilyError, match=re.escape(f"{key}: input should be ") + ".*, got " + re.escape(repr(bad))
            ):
                check_params(name, {key: bad})


@pytest.mark.parametrize(
    "name, params",
    [
        ("ladder", {"m": 48, "n": 256}),
        ("hadamard", {"m": 64, "chain_step": 4}),
        ("cw", {"m": 32, "weight": 16, "max_overlap": 12, "n": 40, "chain_step": 2}),
        ("ood", {"n": 8}),
        ("exhaustive", {"m": 4, "length": 4}),
        ("pool", {"sequences": 50_000}),
        ("code4", {"m": 20}),
        ("code4", {"m": 16, "construction": "search", "steps": 200}),
    ],
)
def test_memory_estimates_cover_the_build(name, params):
    """The estimate is not below what the build allocates (numpy reports to tracemalloc)."""
    estimate = memory_estimate(name, check_params(name, params))
    tracemalloc.start()
    try:
        build_family(name, **params)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.25 * estimate + (1 << 20), (peak, estimate)


def test_the_memory_limit_is_stated():
    assert 0 < memory_limit()
    check_memory("a small thing", 1)
    with pytest.raises(KernelgapError, match=r"a big thing needs about 2\^1328 B of memory; the limit is .*% of"):
        check_memory("a big thing", 10**400)
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(3 << 40) == "3.0 TiB"


# -- models ----------------------------------------------------------------------------


def test_rank_limit_and_parameter_estimate():
    check_model(KernelSpec(feature_map="table", rank=MAX_RANK))
    for rank in (MAX_RANK + 1, 2**70):
        with pytest.raises(KernelgapError, match="model.rank must be ≤"):
            check_model(KernelSpec(rank=rank))
    for spec in (
        KernelSpec(heads=10**12),
        KernelSpec(feature_map="mlp_exp", hidden=10**13),
        KernelSpec(d_value=10**13),
        SoftmaxSpec(score_dim=10**13),
        KernelSpec(feature_map="favor", heads=10**9),
    ):
        with pytest.raises(KernelgapError, match="parameters .4 bytes each. needs about"):
            check_model(spec)
    table = KernelSpec(feature_map="table", rank=MAX_RANK)
    with pytest.raises(KernelgapError, match="needs about"):
        check_model(table, m=24, tokens=10**6)  # 2·10^6 tokens·2^20 features
    check_model(KernelSpec(feature_map="table", rank=16), m=24, tokens=10**4, members=8)
    with pytest.raises(KernelgapError, match="needs about"):  # past int64: refused, not an overflow
        check_model(KernelSpec(hidden=2**62, d_value=2**62))


# -- codes: the Johnson bound and the searches that stop early ----------------------------


def _max_code(m: int, w: int, cap: int) -> int:
    """The largest code by exhaustive search (tiny m only)."""
    words = [frozenset(c) for c in combinations(range(m), w)]
    best = 0

    def grow(chosen: list, start: int) -> None:
        nonlocal best
        best = max(best, len(chosen))
        for i in range(start, len(words)):
            if all(len(words[i] & c) <= cap for c in chosen):
                grow(chosen + [words[i]], i + 1)

    grow([], 0)
    return best


@pytest.mark.parametrize("m, w, cap", [(4, 2, 0), (5, 2, 0), (6, 3, 1), (6, 2, 1), (6, 3, 0), (7, 3, 1), (5, 3, 2)])
def test_johnson_bound_holds_on_tiny_codes(m, w, cap):
    assert _max_code(m, w, cap) <= johnson_bound(m, w, cap)


def test_johnson_bound_exact_cases():
    assert johnson_bound(16, 8, 6) == 1396 and johnson_bound(16, 8, 0) == 2
    for m, w in [(10, 3), (12, 6), (9, 8)]:
        from math import comb

        assert johnson_bound(m, w, w - 1) == comb(m, w)  # any distinct words
    assert johnson_bound(128, 64, 48, stop_above=4096) > 4096


@pytest.mark.timeout(60)  # 64 · 100,000 tries, or a greedy search that never ends
def test_searches_refuse_a_count_above_the_bound_at_once():
    with pytest.raises(FamilyError, match="no such code has more than 1396"):
        random_constant_weight(16, 8, 6, 100_000, max_tries=64 * 100_000)
    with pytest.raises(FamilyError, match="only 2 at most"):
        greedy_constant_weight(6, 3, 0, 3)


def test_random_search_stops_when_the_draws_left_cannot_reach_the_count():
    with pytest.raises(FamilyError, match=r"found only \d+ of 600 words in 3,\d+ draws \(the 512 draws left"):
        random_constant_weight(32, 16, 8, 600, max_tries=4096)
    found = random_constant_weight(32, 16, 8, 600, max_tries=4096, require_count=False)
    assert 2 <= len(found) < 600  # without require_count the search uses every draw


def _reference_random(m, w, cap, count, seed, max_tries):
    """The one-word-at-a-time search the batched one must equal."""
    rng = np.random.default_rng(seed)
    kept, batch = [], 256
    for _ in range(0, max_tries, batch):
        draws = np.argsort(rng.random((batch, m)), axis=1)[:, :w]
        words = np.zeros((batch, m), dtype=np.int64)
        np.put_along_axis(words, draws, 1, axis=1)
        for word in words:
            if not kept or (np.array(kept) @ word).max() <= cap:
                kept.append(word)
                if len(kept) == count:
                    return np.array(kept, dtype=np.uint8)
    return np.array(kept, dtype=np.uint8).reshape(-1, m)


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 24), st.data(), st.integers(0, 2**32 - 1))
def test_batched_random_search_equals_the_word_by_word_one(m, data, seed):
    w = data.draw(st.integers(1, m))
    cap = data.draw(st.integers(0, w - 1))
    count = data.draw(st.integers(1, 80))
    want = _reference_random(m, w, cap, count, seed, 1024)
    got = random_constant_weight(m, w, cap, count, seed=seed, max_tries=1024, require_count=False)
    assert np.array_equal(got, want[: len(got)]) and len(got) == len(want)
    check_constant_weight(got, w, cap)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["train", "--family", "witness", "--max-steps", str(10**24)],
            "train.max_steps: input should be less than or equal to 10000000",
        ),
        (
            ["train", "--family", "witness", "--mse-steps", "10000001"],
            "train.mse_steps: input should be less than or equal to 10000000",
        ),
    ],
)
def test_schedules_beyond_the_step_limit_are_refused(cli, args, message):
    code, out, err = cli(*args)
    assert code == 2 and err.count("\n") == 1 and message in err and out == ""


def test_a_layer_module_wider_than_the_limit_is_refused():
    from kernelgap.errors import KernelgapError
    from kernelgap.models.external import ModuleSpec

    with pytest.raises(KernelgapError, match="d_model: input should be less than or equal to 65536"):
        ModuleSpec(target="kernelgap.probe.examples:DecayedLinearAttention", d_model=1 << 17)
