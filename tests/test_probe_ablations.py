"""Ablations of a probe (a ``[[probes]]`` entry with ``ablates`` and ``cause``): the config's
checks, the cause the report states from the runs, and the fla adapter against fla's maps."""

from __future__ import annotations

import itertools
import json

import pytest

from kernelgap.errors import ConfigError
from kernelgap.experiments.probe import section as probe_sections
from kernelgap.experiments.probe.section import ABLATION, SKIPPED, probes_section
from kernelgap.experiments.probe.text import cause_text, conclusions, probe_sentence
from kernelgap.io import atomic_write_json
from kernelgap.probe.config import CAUSES, parse_probes
from kernelgap.probe.verdicts import rank_verdicts
from kernelgap.report.integrity import sealed

#: what "cause not found" adds where no twin was trained at the feature count
NO_TWIN = "; no twin of its kernel trained at its feature count (a twin or an ablation would place it)"
BASE = {"name": "fla", "target": "kernelgap.probe.zoo:FlaLinearAttention", "kwargs": {"feature_map": "hedgehog"}}


def ablation(**changes) -> dict:
    return {**BASE, "name": "fla-init", "ablates": "fla", "cause": "initialisation", **changes}


# -- the config ---------------------------------------------------------------------------


def test_an_ablation_names_the_probe_it_varies_and_what_it_changes(tmp_path):
    entry = ablation(kwargs={"feature_map": "hedgehog", "init_scale": 0.5}, lr=1e-3, seeds=[0, 1, 2])
    base, abl = parse_probes([BASE, entry], tmp_path / "p.toml")
    assert abl.ablates == "fla" and abl.cause == "initialisation"
    assert abl.change_from(base) == "init_scale = 0.5, lr = 0.001"  # the seeds are no change
    assert base.change_from(abl) == "without init_scale, lr = null"


@pytest.mark.parametrize(
    "entries, needle",
    [
        ([BASE, ablation(ablates="nothing")], "probes[1].ablates: names no other probe of the profile 'nothing'"),
        ([BASE, ablation(ablates="fla-init")], "probes[1].ablates: names no other probe of the profile 'fla-init'"),
        ([BASE, ablation()], "probes[1].ablates: changes nothing in 'fla'"),
        (
            [BASE, ablation(lr=1e-3), ablation(name="again", ablates="fla-init", lr=1e-2)],
            "probes[2].ablates: 'fla-init' is itself an ablation",
        ),
        ([BASE, ablation(cause=None, lr=1e-3)], "probes[1].cause: ablates and cause come together"),
        ([BASE, {**BASE, "name": "x", "cause": "normalisation"}], "probes[1].cause: ablates and cause come together"),
        ([BASE, ablation(cause="weather", lr=1e-3)], "probes[1].cause: "),
    ],
)
def test_a_bad_ablation_is_one_line_naming_its_key(tmp_path, entries, needle):
    with pytest.raises(ConfigError) as caught:
        parse_probes(entries, tmp_path / "p.toml")
    text = str(caught.value)
    assert text.startswith(f"{tmp_path / 'p.toml'}: ") and needle in text and "\n" not in text


def test_a_bad_ablation_in_a_profile_is_exit_2_without_a_traceback(tmp_path, cli):
    profile = tmp_path / "bad"
    profile.mkdir()
    (profile / "profile.toml").write_text(
        'experiments = ["probe"]\n\n[[probes]]\nname = "fla"\ntarget = "a:b"\n\n'
        '[[probes]]\nname = "fla-lr"\ntarget = "a:b"\nlr = 0.001\nablates = "flaa"\ncause = "learning rate"\n'
    )
    code, out, err = cli("reproduce", "--profile", str(profile), "--out", str(tmp_path / "out"))
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, (out, err)
    assert "probes[1].ablates: names no other probe of the profile 'flaa'" in err


# -- the cause, from the runs --------------------------------------------------------------


def rows(rank: int, states: tuple[str, ...]) -> list[dict]:
    """Run rows of one rank: ``exact`` (max error 0.3) or ``failed`` (1.2) per seed."""
    return [
        {"rank": rank, "seed": k, "max_error": 0.3 if s == "exact" else 1.2, "final_loss": None, "final_power": None}
        for k, s in enumerate(states)
    ]


def probes_folder(tmp_path, monkeypatch, mine, ablations: dict[str, tuple[str, tuple]]):
    """A reproduction's ``probe/`` folder: probe ``fla`` with runs ``mine`` at rank 32, and an
    ablation per ``name → (cause, runs)``, each a folder with its ``ablation.json`` (the runs
    are read through the verdict rules; no training)."""
    runs = {"fla": mine, **{name: states for name, (_, states) in ablations.items()}}

    def meta(folder):
        return {"target": "t:T", "class": "T", "suites": [{}]}

    def suite(folder, baseline, meta, s):
        mine = rows(32, runs[folder.name])
        verdicts = rank_verdicts(mine, {32: 64}, 16, None)
        fitted = sum(r["max_error"] < 0.5 for r in mine)
        facts = {"transition_rank": 32 if 2 * fitted > len(mine) else None, "max_rank": 32, "fitted_runs": fitted}
        base = {"baseline_transition": 32, "baseline_max_rank": 32, "diverged": []}
        return {
            "name": "witness",
            "ood": False,
            "criterion": "exact",
            "runs": mine,
            "verdicts": verdicts,
            **facts,
            **base,
        }

    monkeypatch.setattr(probe_sections, "read_probe_meta", meta)
    monkeypatch.setattr(probe_sections, "_suite", suite)
    for name, (cause, _) in ablations.items():
        facts = {"ablates": "fla", "cause": cause, "change": f"{name} = 1"}
        atomic_write_json(tmp_path / name / ABLATION, sealed(facts), tmp_path)
    (tmp_path / "fla").mkdir(parents=True)
    atomic_write_json(tmp_path / "gone" / SKIPPED, sealed({"name": "gone", "target": "x:Y", "why": "no"}), tmp_path)
    return probes_section(tmp_path)


def test_the_cause_is_stated_exactly_where_an_ablation_fits_on_most_seeds(tmp_path, monkeypatch):
    """Every mix of up to three seeds of one ablation, and none: a cause where the ablation is
    exact on most seeds and the module is not; "not found" (with what was tried) otherwise."""
    for seeds in (1, 2, 3):
        for mix, mine in itertools.product(
            itertools.product(("exact", "failed"), repeat=seeds), (("failed",) * 3, ("exact",) * 3)
        ):
            folder = tmp_path / f"{seeds}-{''.join(s[0] for s in mix)}-{mine[0]}"
            folder.mkdir()
            probes = {p["name"]: p for p in probes_folder(folder, monkeypatch, mine, {"a": ("normalisation", mix)})}
            (v,) = probes["fla"]["suites"][0]["verdicts"]
            fitted = mix.count("exact")
            if mine[0] == "exact":
                assert "ablations" not in v and "cause" not in probe_sentence(probes["fla"])
                continue
            assert v["verdict"] == "not fitted" and v["ablations"][0]["fitted"] == fitted
            text = probe_sentence(probes["fla"])
            if 2 * fitted > seeds:
                want = f"cause: normalisation (the same module with a = 1 is exact on {fitted} of {seeds} seeds)"
            else:
                want = f"cause not found: tried a = 1 (normalisation: {fitted} of {seeds} seeds exact)" + NO_TWIN
            assert want in text and cause_text(v) == want
            assert conclusions({"probes": list(probes.values())})["fla, witness, rank 32: cause"] == want
            assert "an ablation of fla (normalisation: a = 1)" in probe_sentence(probes["a"])


def test_every_fitting_ablation_is_a_cause_and_none_is_said_so(tmp_path, monkeypatch):
    both = {"a": ("initialisation", ("exact",) * 3), "b": ("learning rate", ("exact", "exact", "failed"))}
    probes = probes_folder(tmp_path / "x", monkeypatch, ("failed",) * 3, both)
    (v,) = next(p for p in probes if p["name"] == "fla")["suites"][0]["verdicts"]
    assert cause_text(v) == (
        "cause: initialisation (the same module with a = 1 is exact on 3 of 3 seeds); "
        "cause: learning rate (the same module with b = 1 is exact on 2 of 3 seeds)"
    )
    probes = probes_folder(tmp_path / "y", monkeypatch, ("failed",) * 3, {})
    (v,) = next(p for p in probes if p["name"] == "fla")["suites"][0]["verdicts"]
    assert cause_text(v) == "cause not found: no ablation in the profile varies it" + NO_TWIN


@pytest.mark.parametrize(
    "content, needle",
    [("{not json", "is corrupted (not valid JSON)"), (json.dumps({"ablates": "fla"}), "has no")],
)
def test_a_damaged_ablation_record_is_one_line(tmp_path, content, needle):
    (tmp_path / "fla").mkdir(parents=True)
    (tmp_path / "fla" / ABLATION).write_text(content)
    with pytest.raises(ConfigError) as caught:
        probe_sections.read_ablation(tmp_path / "fla")
    assert "is not a kernelgap ablation record" in str(caught.value) and needle in str(caught.value)
    atomic_write_json(tmp_path / "fla" / ABLATION, sealed({"ablates": "fla", "cause": "x"}), tmp_path)
    with pytest.raises(ConfigError, match="change"):
        probe_sections.read_ablation(tmp_path / "fla")


def test_the_causes_are_few_and_named():
    assert len(set(CAUSES)) == len(CAUSES) and "initialisation" in CAUSES and "normalisation" in CAUSES


# -- the fla adapter ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hedgehog", "t2r", "dpfp", "relu", "taylor"])
def test_the_adapter_maps_queries_and_keys_as_fla_s_own_layer_does(name):
    """fla's ``LinearAttention`` (``tie_feature_map_qk=False``, its default) gives queries and
    keys a map each: two modules, no parameter shared, each fla's class; the output is plain
    normalized linear attention of those features."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("fla")
    from fla.modules import feature_map as fla_maps

    from kernelgap.probe.zoo import MAPS, FlaLinearAttention

    torch.manual_seed(0)
    layer = FlaLinearAttention(8, 4, feature_map=name)
    assert type(layer.phi_q) is type(layer.phi_k) is getattr(fla_maps, MAPS[name])
    assert layer.phi_q is not layer.phi_k
    shared = {id(p) for p in layer.phi_q.parameters()} & {id(p) for p in layer.phi_k.parameters()}
    assert not shared
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        for p in layer.phi_k.parameters():  # a key map of its own: moving it leaves the queries' alone
            p.add_(0.5)
        q, k = layer.phi_q(layer.q(x)), layer.phi_k(layer.k(x))
        weights = q @ k.transpose(-1, -2)
        want = weights @ layer.v(x) / weights.sum(-1, keepdim=True).clamp_min(1e-6)
        assert torch.allclose(layer(x), want)
        if list(layer.phi_q.parameters()):
            assert not torch.allclose(layer.phi_q(layer.q(x)), layer.phi_k(layer.q(x)))


def test_the_map_layer_ablation_leaves_fla_s_map_its_own_formula():
    """``map_layer=False``: fla's Hedgehog is ``softmax([2u, −2u])`` of the projection, with no
    trainable layer left; a map with no layer (DPFP) is refused in one line."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("fla")
    from kernelgap.probe.zoo import FlaLinearAttention

    torch.manual_seed(0)
    layer = FlaLinearAttention(8, 4, feature_map="hedgehog", map_layer=False)
    assert not list(layer.phi_q.parameters()) and not list(layer.phi_k.parameters())
    u = torch.randn(3, 4)
    with torch.no_grad():
        assert torch.allclose(layer.phi_q(u), torch.softmax(torch.cat([2 * u, -2 * u], -1), -1))
    with pytest.raises(ValueError, match="has no trainable layer to leave out"):
        FlaLinearAttention(8, 4, feature_map="dpfp", map_layer=False)


def test_lat_s_adapter_is_lat_as_shipped_and_changes_only_its_normalisation():
    """``normalise="sequence"`` is lat's own ``SelfAttention`` (the same weights, the same
    output); ``"max"`` and ``"mass"`` keep each query's weights summing to 1 on the same kernel;
    only ``"mass"`` is a kernel of fixed features, its weight ratios blind to the other keys."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("linear_attention_transformer")
    from linear_attention_transformer.linear_attention_transformer import SelfAttention

    from kernelgap.probe.lat import LatSelfAttention, _normalised_by_mass

    torch.manual_seed(0)
    adapter, shipped = LatSelfAttention(8, 4), SelfAttention(dim=8, heads=1, dim_head=4)
    shipped.load_state_dict(adapter.attention.state_dict())
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(adapter(x), shipped(x))
    q, k = torch.randn(2, 1, 5, 4), torch.randn(2, 1, 5, 4)
    eye = torch.eye(5).expand(2, 1, 5, 5)  # the values pick each weight out
    for per_feature in (True, False):
        weights = _normalised_by_mass(per_feature)(q, k, eye) * 4**0.5
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1, 5))
        moved = k.clone()
        moved[..., 4, :] += 3.0  # another key changes: does the ratio of keys 0 and 1 move?
        again = _normalised_by_mass(per_feature)(q, moved, eye)
        ratio, ratio_again = weights[..., 0] / weights[..., 1], again[..., 0] / again[..., 1]
        assert torch.allclose(ratio, ratio_again) != per_feature
    assert not torch.allclose(LatSelfAttention(8, 4, "max")(x), LatSelfAttention(8, 4)(x))
    with pytest.raises(ValueError, match="choose from sequence, max, mass"):
        LatSelfAttention(8, 4, "sum")
    # keys normalised over their sequence are no fixed kernel: rank-free, measured (the check's
    # duplication and order alone would call lat a normalised kernel; its context does not)
    from linear_attention_transformer.linear_attention_transformer import SelfAttention as Shipped

    from kernelgap.probe.structure import ZERO, structure

    kinds = {n: structure(LatSelfAttention(32, 8, n), 12, "layer") for n in ("sequence", "max", "mass")}
    kinds["shipped"] = structure(Shipped(dim=32, heads=1, dim_head=8), 12, "layer", kernel=True)
    assert {n: (k.kind, k.declared) for n, k in kinds.items()} == {
        "sequence": ("normalised", False),
        "max": ("normalised", False),
        "mass": ("normalised kernel", False),
        "shipped": ("normalised", False),
    }
    assert kinds["mass"].context <= ZERO < min(kinds[n].context for n in ("sequence", "max", "shipped"))
    assert kinds["sequence"].duplication <= ZERO and kinds["sequence"].order <= ZERO


def test_the_reproduction_leaves_each_ablation_its_record(tmp_path, monkeypatch):
    """The probe step writes ``ablation.json`` beside an ablation's runs (the probe it varies,
    the cause and the change read off the two entries), and none for a probe that is none."""
    from kernelgap.experiments.probe import step

    configs = []
    monkeypatch.setattr(step, "run_probe", configs.append)
    base, abl = parse_probes([BASE, ablation(kwargs={**BASE["kwargs"], "map_layer": False})], tmp_path / "p.toml")
    step._probe_one(base, tmp_path, {})
    step._probe_one(abl, tmp_path, {}, base)
    assert probe_sections.read_ablation(tmp_path / "fla") is None
    assert probe_sections.read_ablation(tmp_path / "fla-init") == {
        "ablates": "fla",
        "cause": "initialisation",
        "change": "map_layer = false",
    }
    assert [c.kwargs for c in configs] == [BASE["kwargs"], {**BASE["kwargs"], "map_layer": False}]


@pytest.mark.parametrize("twin", [None, "exact", "not fitted", "collapsed"])
@pytest.mark.parametrize("ablation_fits", [False, True])
def test_a_twin_that_fails_too_puts_the_cause_in_the_kernel(twin, ablation_fits):
    """The twin's verdict at the same feature count decides between "the kernel" and "the
    module's own layers" where no ablation fits; a fitting ablation is the cause either way."""
    fitted = 3 if ablation_fits else 0
    v = {
        "verdict": "not fitted",
        "twin": twin,
        "twin_map": "favor",
        "ablations": [{"cause": "initialisation", "change": "a = 1", "fitted": fitted, "seeds": 3}],
    }
    text = cause_text(v)
    if ablation_fits:
        assert text == "cause: initialisation (the same module with a = 1 is exact on 3 of 3 seeds)"
    elif twin in ("not fitted", "collapsed"):
        assert text == f"cause: the kernel, not the library (kernelgap's own favor in the same wrapper: {twin} too)"
    else:
        assert text.startswith("cause not found: tried a = 1 (initialisation: 0 of 3 seeds exact)")
        assert ("lies in the module's own layers" in text) == (twin == "exact")
        assert text.endswith(NO_TWIN) == (twin is None)
