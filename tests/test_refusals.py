"""Inputs that used to be accepted or to end in a traceback, refused in one line before any
work: model fields a ``train`` run's kind does not use (as a sweep file refuses them),
devices a model cannot train on, seeds out of 0..2^64 − 1, and a product family whose
matching is inconsistent (a good candidate above its query's least overlap)."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgap.errors import ConfigError, FamilyError, KernelgapError
from kernelgap.models.devices import resolve_device
from kernelgap.run_values import SEED_LIMIT, device_problem, seed_problem
from kernelgap.task import ProductFamily, build_family, load_family, save_family
from kernelgap.task.family_checks import check_consistent, first_inconsistent
from kernelgap.task.family_file import family_from_json
from kernelgap.theory.certificate import certify
from kernelgap.training import RunConfig, TrainConfig
from test_fuzz_cli import assert_refused, run_cli

SWEEP = """
name = "kinds"
[family]
name = "exhaustive"
params = {m = 2, length = 2}
[model]
kind = "softmax"
FIELD
[train]
mse_steps = 1
max_steps = 1
"""

#: Flags of ``train`` naming a field a softmax model is not built from, with a non-default value.
NOT_SOFTMAX = [("--feature-map", "feature_map", "elu1", '"elu1"'), ("--rank", "rank", "8", "8")]


@pytest.fixture
def world(tmp_path) -> Path:
    return tmp_path


@pytest.mark.parametrize(("flag", "key", "value", "toml"), NOT_SOFTMAX)
def test_train_refuses_what_a_softmax_model_is_not_built_from_as_a_sweep_file_does(world, flag, key, value, toml):
    base = ["train", "--family", "exhaustive", "-p", "m=2", "-p", "length=2", "--mse-steps", "1"]
    code, _, err = run_cli([*base, "--kind", "softmax", flag, value], world)
    assert code == 2 and err.startswith(f"error: model.{key}: does not apply to kind = 'softmax'"), err
    sweep = world / "kinds.toml"
    sweep.write_text(SWEEP.replace("FIELD", f"{key} = {toml}"))
    code_s, _, err_s = run_cli(["sweep", str(sweep), "--out", str(world / "out")], world)
    assert code_s == 2 and err_s == err.replace("error: ", f"error: {sweep}: "), (err, err_s)
    assert not (world / "out").exists()


def test_train_takes_the_fields_a_softmax_model_is_built_from(world):
    argv = ["train", "--family", "exhaustive", "-p", "m=2", "-p", "length=2", "--kind", "softmax"]
    code, out, err = run_cli([*argv, "--readout", "linear", "--mse-steps", "1", "--max-steps", "1", "--json"], world)
    assert code == 0, err
    model = json.loads(out)["config"]["model"]
    assert model["kind"] == "softmax" and model["readout"] == "linear" and model["feature_map"] is None


@pytest.mark.parametrize(("kind", "run_id"), [("kernel", "b30e1b01022401e4"), ("softmax", "77cc994d26fd4a0d")])
def test_a_run_from_the_command_line_keeps_its_run_id(world, kind, run_id):
    """The defaults ``train`` gives a model (a kernel model: table, rank 16) are those it always
    gave: the run ids are those the command line gave before it sent only the given fields."""
    argv = ["train", "--family", "exhaustive", "-p", "m=2", "-p", "length=2", "--mse-steps", "1", "--max-steps", "1"]
    code, out, err = run_cli([*argv, "--kind", kind, "--json"], world)
    assert code == 0, err
    assert json.loads(out)["id"] == run_id


# -- devices ------------------------------------------------------------------------------------

NOT_DEVICES = ["meta", "", "cuda:", "cuda:x", "cpu:-1", "gpu", "CUDA", "cuda:0:1", "hpu", "cuda:99999", " cpu"]


@pytest.mark.parametrize("device", NOT_DEVICES)
def test_a_device_name_a_model_cannot_train_on_is_refused_by_its_spelling(device):
    assert device_problem(device) is not None
    with pytest.raises(ConfigError, match=r"^train\.device: must be cpu, cuda, cuda:N or mps, got "):
        TrainConfig(device=device)
    with pytest.raises(KernelgapError):
        resolve_device(device)


@pytest.mark.parametrize("device", ["cpu", "cpu:0", "cuda", "cuda:0", "cuda:12", "mps"])
def test_device_names_of_training_devices_are_spelled_right(device):
    assert device_problem(device) is None


def test_devices_absent_here_are_refused_by_resolve_device():
    past = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(KernelgapError, match="CUDA is not available|only .* CUDA device"):
        resolve_device(past)
    with pytest.raises(KernelgapError, match="the CPU is cpu or cpu:0"):
        resolve_device("cpu:1")
    if not torch.cuda.is_available():
        with pytest.raises(KernelgapError, match="CUDA is not available"):
            resolve_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("device", ["meta", "cuda:x", "cuda:99", "cpu:3"])
def test_every_command_with_a_device_refuses_one_it_cannot_train_on(world, device):
    family = ["--family", "exhaustive", "-p", "m=2", "-p", "length=2"]
    assert_refused(world, ["train", *family, "--device", device, "--mse-steps", "1", "--max-steps", "1"])
    assert_refused(world, ["verify", "--m", "2", "--device", device])
    sweep = world / "inputs" / "device.toml"
    sweep.parent.mkdir(exist_ok=True)
    sweep.write_text(SWEEP.replace("FIELD", "").replace("[train]", f'[train]\ndevice = "{device}"'))
    assert_refused(world, ["sweep", str(sweep), "--out", str(world / "out")])


# -- seeds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [-1, -(2**63), SEED_LIMIT, SEED_LIMIT + 1, 10**30])
def test_seeds_out_of_range_are_refused_everywhere_before_any_build(world, seed):
    assert seed_problem(seed) is not None
    with pytest.raises(ConfigError, match=r"^seed: must be an integer in 0\.\.2\^64 − 1, got "):
        RunConfig.parse({"family": {"name": "witness"}, "seed": seed})
    assert_refused(world, ["train", "--family", "witness", "--seed", str(seed)])
    sweep = world / "inputs" / "seed.toml"
    sweep.parent.mkdir(exist_ok=True)
    sweep.write_text(SWEEP.replace("FIELD", "") + f"[grid]\nseed = [0, {seed}]\n")
    assert_refused(world, ["sweep", str(sweep), "--out", str(world / "out")])
    if seed >= 0:
        assert_refused(world, ["probe", "kernelgap.probe.examples:DecayedLinearAttention", "--seeds", f"1,{seed}"])


def test_the_extreme_seeds_are_taken_by_every_generator_a_run_seeds():
    for seed in (0, SEED_LIMIT - 1):
        assert seed_problem(seed) is None
        torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        np.random.default_rng(seed)
    RunConfig.parse({"family": {"name": "witness"}, "seed": SEED_LIMIT - 1})
    torch.manual_seed(0)


# -- consistent matchings -----------------------------------------------------------------------


def brute_consistent(tokens: np.ndarray, pairs, candidates) -> bool:
    t = tokens.astype(int)
    return all(t[q] @ t[g] == min(t[q] @ t[c] for c in candidates) for q, g in pairs)


def every_word(m: int) -> np.ndarray:
    return np.array([[v >> k & 1 for k in range(m)] for v in range(2**m)], dtype=np.uint8)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_consistency_on_every_small_query_candidate_set_and_good_candidate(m):
    """Every query, every non-empty candidate set and every good candidate in it, for m ≤ 3."""
    tokens = every_word(m)
    words = range(2**m)
    for size in range(1, 2**m + 1):
        for candidates in itertools.combinations(words, size):
            cands = np.array(candidates)
            for q, g in itertools.product(words, candidates):
                found = first_inconsistent(tokens, np.array([[q, g]]), cands)
                assert (found is None) == brute_consistent(tokens, [(q, g)], candidates), (q, g, candidates)
                if found is not None:
                    _, lower, least = found
                    assert tokens[q].astype(int) @ tokens[lower].astype(int) == least < tokens[q] @ tokens[g]


@st.composite
def products(draw):
    m = draw(st.integers(1, 7))
    words = st.integers(0, 2**m - 1)
    queries = sorted(set(draw(st.lists(words, min_size=1, max_size=6))))
    candidates = sorted(set(draw(st.lists(words, min_size=1, max_size=8))))
    goods = [draw(st.sampled_from(candidates)) for _ in queries]
    return m, queries, candidates, list(zip(queries, goods))


@settings(max_examples=300, deadline=None)
@given(products(), st.integers(1, 40))
def test_consistency_equals_the_brute_force_whatever_the_chunk(case, chunk):
    m, queries, candidates, pairs = case
    tokens = every_word(m)
    import kernelgap.task.family_checks as checks

    old, checks.CONSISTENCY_CELLS = checks.CONSISTENCY_CELLS, chunk
    try:
        found = first_inconsistent(tokens, np.array(pairs), np.array(candidates))
    finally:
        checks.CONSISTENCY_CELLS = old
    assert (found is None) == brute_consistent(tokens, pairs, candidates)
    if found is not None:  # the first inconsistent entry
        assert brute_consistent(tokens, pairs[: found[0]], candidates)
        assert not brute_consistent(tokens, [pairs[found[0]]], candidates)


@pytest.mark.parametrize(("name", "params"), [("ladder", {"m": 16, "n": 6}), ("layer", {"m": 12})])
def test_registered_product_families_are_consistent_and_load_back(tmp_path, name, params):
    family = build_family(name, **params)
    assert isinstance(family, ProductFamily) and check_consistent(family) is family
    save_family(family, tmp_path / "f.json")
    assert load_family(tmp_path / "f.json").matching == family.matching


def inconsistent_copy(path: Path, out: Path) -> None:
    """The family file with entry 0's good candidate replaced by a candidate of more overlap."""
    data = json.loads(path.read_text())
    query, good = data["matching"][0]
    overlap = lambda a, b: sum(x == y == "1" for x, y in zip(a, b))  # noqa: E731
    worse = max(data["candidates"], key=lambda c: overlap(query, c))
    assert overlap(query, worse) > overlap(query, good)
    others = {q for q, _ in data["matching"][1:]}
    assert query not in others
    data["matching"][0] = [query, worse]
    out.write_text(json.dumps(data))


def test_an_inconsistent_matching_is_refused_in_one_line_before_certification(world):
    path = world / "ladder.json"
    save_family(build_family("ladder", m=16, n=6), path)
    bad = world / "bad.json"
    inconsistent_copy(path, bad)
    with pytest.raises(FamilyError, match=r"matching entry 0: its good candidate overlaps its query in \d+ bits"):
        load_family(bad)
    assert_refused(world, ["certify", str(bad)])
    assert_refused(world, ["train", "--family", str(bad), "--mse-steps", "1", "--max-steps", "1"])
    # the same family through the API keeps its matching: its certificate is sound but weaker
    family = load_family(path)
    q, _ = family.matching[0]
    t = family.tokens.astype(int)
    worse = int(max(family.candidates, key=lambda c: t[q] @ t[c]))
    weaker = ProductFamily(
        family.tokens, family.queries, family.candidates, 1, [(q, worse), *family.matching[1:]], length=3
    )
    assert certify(weaker, Fraction(1, 2)).certified_rank <= certify(family).certified_rank


def test_ties_at_the_least_overlap_are_consistent():
    tokens = every_word(2)  # 00, 10, 01, 11
    data = {
        "m": 2,
        "query_position": 1,
        "queries": ["11"],
        "candidates": ["10", "01"],
        "matching": [["11", "01"]],
    }
    assert family_from_json(data).matching
    assert first_inconsistent(tokens, np.array([[3, 2]]), np.array([1, 2])) is None


def test_the_fallback_learning_rate_is_a_generic_feature_maps():
    """``FALLBACK_LR`` is written out in the config (which imports no torch, unlike the maps)."""
    from kernelgap.models.feature_maps import FeatureMap
    from kernelgap.training.config import FALLBACK_LR

    assert FALLBACK_LR == FeatureMap.default_lr
