"""The probe's structure check (what kind of map a module is) and the additivity certificate:
an additive module is certified at every rank, a module the lower bound does not cover is
judged rank-free (never 'at the wall'), the additive floor is exact and sandwiched."""

from __future__ import annotations

import itertools
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from kernelgap.experiments.probe.section import probe_section
from kernelgap.experiments.probe.text import probe_sentence
from kernelgap.models.external import ModuleSpec, build_module
from kernelgap.probe import ProbeConfig, run_probe
from kernelgap.probe.examples import DecayedLinearAttention, Elu1LinearAttention, UniformAttention
from kernelgap.probe.floor import additive_floor, minimax_floor
from kernelgap.probe.structure import ZERO, structure
from kernelgap.probe.twin import BuiltinMapAttention
from kernelgap.probe.verdicts import ADDITIVE, RANK_FREE, VERDICTS, needs_recipe, rank_verdicts
from kernelgap.task import build_family


class _Kernel(nn.Module):
    """``α_ij = <elu(q_i) + 1, elu(k_j) + 1>`` and values: the parts the test layers share."""

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d_model, rank), nn.Linear(d_model, rank), nn.Linear(d_model, d_model)

    def kernelgap_weights(self, x: torch.Tensor) -> torch.Tensor:
        return (F.elu(self.q(x)) + 1) @ (F.elu(self.k(x)) + 1).transpose(-1, -2)


class Additive(_Kernel):
    """Linear attention without the denominator: ``y_i = Σ_j α_ij v_j``."""

    def forward(self, x):
        return self.kernelgap_weights(x) @ self.v(x)


class OutputNormalised(_Kernel):
    """``Σ_j α_ij v_j`` normalised over its features (an RMS norm), as fla's linear attention."""

    def forward(self, x):
        return F.rms_norm(self.kernelgap_weights(x) @ self.v(x), (x.shape[-1],))


class Softmax(_Kernel):
    """Dense softmax attention: normalised by its mass, a kernel of no finite rank."""

    def forward(self, x):
        return torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2), -1) @ self.v(x)


class SignedNormalised(_Kernel):
    """Normalised attention whose weights ``<q_i, k_j>`` are signed (no feature map)."""

    def kernelgap_weights(self, x):
        return self.q(x) @ self.k(x).transpose(-1, -2) + 0.1

    def forward(self, x):
        a = self.kernelgap_weights(x)
        return a @ self.v(x) / a.sum(-1, keepdim=True)


class DeclaredSoftmax(Softmax):
    kernelgap_kind = "gated/other"


def built(cls, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return cls(32, 8)


class UndeclaredDecay(DecayedLinearAttention):
    kernelgap_kind = None


@pytest.mark.parametrize(
    "cls, kind",
    [
        (Elu1LinearAttention, "normalised kernel"),
        (BuiltinMapAttention, "normalised kernel"),  # kernelgap's own kernel layer
        (Additive, "additive"),
        (UniformAttention, "additive"),  # query-blind, so additive
        (OutputNormalised, "output-normalised"),
        (Softmax, "normalised"),  # no finite rank declared: rank-free
        (SignedNormalised, "normalised"),  # signed weights: not the theorem's kernel
        (DecayedLinearAttention, "normalised kernel"),  # declared: position-dependent maps are covered
        (UndeclaredDecay, "gated/other"),  # the same layer, judged from outside
        (DeclaredSoftmax, "gated/other"),
    ],
)
def test_the_structure_check_tells_each_kind(cls, kind):
    st_ = structure(partial(built, cls), 24, "layer")
    assert st_.kind == kind and st_.draws == 2 and st_.precision == "float64"
    assert st_.declared == (cls in (DeclaredSoftmax, DecayedLinearAttention))
    assert (st_.interaction <= ZERO) == (kind == "additive")
    decayed = issubclass(cls, DecayedLinearAttention)
    assert (st_.order <= ZERO) == (not decayed)  # only the decay sees the order
    if kind == "output-normalised":
        assert st_.rms_spread <= ZERO and st_.duplication <= ZERO  # a norm also hides the mass
    if cls is Additive:
        assert st_.duplication >= 1.0  # every term doubled: y' − y = y, at least its RMS somewhere
    if kind in ("normalised kernel", "normalised") and cls is not SignedNormalised and not decayed:
        assert st_.duplication <= ZERO and st_.rms_spread > ZERO
    assert st_.signed == ({SignedNormalised: True}.get(cls, False) if issubclass(cls, _Kernel) else None)


def test_the_check_reads_the_probes_own_model_as_the_bare_layer_and_changes_no_global_state():
    """Behind the probe's wrapper (build_module, any seed) the kind is the bare layer's; a
    module given as it is is read once, and the global generator is left as it was."""
    for cls, kind in ((Additive, "additive"), (OutputNormalised, "output-normalised"), (Elu1LinearAttention, None)):
        spec = ModuleSpec(target=f"{cls.__module__}:{cls.__qualname__}", interface="layer")
        got = structure(partial(build_module, cls, spec, 24, 8), 24, length=3)
        assert got.kind == (kind or "normalised kernel")
    module = built(Additive, 3)
    state = torch.get_rng_state()
    once = structure(module, 24, "layer")
    assert once.draws == 1 and once.kind == "additive" and torch.equal(state, torch.get_rng_state())


class _Tables(nn.Module):
    """A ``sequence`` module from random tables: ``F(x_1) + H_2(x_1, x_2) + H_3(x_1, x_3)`` plus
    ``eps`` times a product of the two candidates' values (not additive when ``eps ≠ 0``)."""

    def __init__(self, m: int, seed: int, eps: float) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(4, m, m, generator=g))
        self.eps = eps

    def forward(self, t):
        out = []
        for i in range(t.shape[1]):
            a, b = [j for j in range(t.shape[1]) if j != i][:2]
            h = lambda k, j: torch.einsum("bm,mn,bn->b", t[:, i], self.w[k], t[:, j])  # noqa: E731
            out.append(h(0, i) + h(1, a) + h(2, b) + self.eps * h(3, a) * h(3, b))
        return torch.stack(out, 1)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.0, 1e-2, 1.0]))
def test_additivity_is_the_rectangle_identity(seed, eps):
    got = structure(lambda s: _Tables(6, seed + s, eps), 6)
    assert (got.kind == "additive") == (eps == 0.0)
    assert got.rms_spread is None and got.signed is None  # a scalar output, no weights exposed
    assert (got.order > ZERO) and (got.duplication > ZERO)  # position-dependent H, no mass


class _KeysOfTheirSequence(nn.Module):
    """Normalised attention on the features ``exp(K x)``, each key feature scaled by ``1 + eps``
    times its mean over the sequence: a fixed kernel when ``eps = 0``; else a key's weight
    depends on the other keys (as lat's softmax over the sequence), duplication and order 0."""

    def __init__(self, seed: int, eps: float, d_model: int = 32, rank: int = 8) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.q, self.k = (nn.Parameter(torch.randn(rank, d_model, generator=g) / d_model**0.5) for _ in "qk")
        self.v = nn.Parameter(torch.randn(d_model, d_model, generator=g))
        self.eps = eps

    @staticmethod
    def kernelgap_features(rank: int) -> int:
        return rank

    def forward(self, x):
        phi_q, phi_k = (x @ self.q.T).exp(), (x @ self.k.T).exp()
        keys = phi_k * (1 + self.eps * phi_k.mean(-2, keepdim=True))
        a = phi_q @ keys.transpose(-1, -2)
        return a @ (x @ self.v) / a.sum(-1, keepdim=True)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([0.0, 1e-2, 1.0]))
def test_a_key_weighed_by_its_sequence_is_no_fixed_kernel(seed, eps):
    """The context measure (the cycle of weight ratios) is 0 exactly for fixed weights, so the
    kind is a normalised kernel only then; duplication and order cannot tell the two apart."""
    got = structure(lambda s: _KeysOfTheirSequence(seed + s, eps), 12, "layer")
    assert got.duplication <= ZERO and got.order <= ZERO
    assert (got.context <= ZERO) == (eps == 0.0)
    assert got.kind == ("normalised kernel" if eps == 0.0 else "normalised")


@pytest.mark.parametrize("feature_map", ["elu1", "hedgehog", "favor", "relu", "taylor"])
def test_every_fixed_feature_map_reads_as_a_fixed_kernel(feature_map):
    got = structure(lambda s: (torch.manual_seed(s), BuiltinMapAttention(32, 16, feature_map))[1], 12, "layer")
    assert got.context <= ZERO and got.kind == "normalised kernel"


# -- the additive floor --------------------------------------------------------------------


def _rectangle_bound(family) -> Fraction:
    """``max |t_gg + t_bb − t_gb − t_bg| / 4`` over every rectangle of the family (brute force):
    a lower bound on any additive model's max error (docs/theory.md)."""
    index, targets = np.asarray(family.index), family.targets()
    best = Fraction(0)
    for p in family.scored_positions:
        a, b = [o for o in range(index.shape[1]) if o != p][:2]
        seen = {(int(r[p]), int(r[a]), int(r[b])): int(targets[k, p]) for k, r in enumerate(index)}
        for (q, g, h), t in seen.items():
            for (q2, g2, h2), t2 in seen.items():
                if q2 == q and g2 != g and h2 != h and (q, g, h2) in seen and (q, g2, h) in seen:
                    best = max(best, Fraction(abs(t + t2 - seen[q, g, h2] - seen[q, g2, h]), 4))
    return best


def test_the_additive_floor_of_the_witness_family_is_three_halves_either_reading():
    for reading in ("first", "final"):
        family = build_family("witness", reading=reading)
        assert additive_floor(family) == minimax_floor(family) == _rectangle_bound(family) == Fraction(3, 2)
    assert additive_floor(build_family("ood", n=4, queries_per_class=8, split="train")) == 0


@pytest.mark.parametrize("m, query", list(itertools.product([1, 2], [None, 1, 3])))
def test_the_additive_floor_is_sandwiched_on_exhaustive_families(m, query):
    """Rectangle bound ≤ additive floor ≤ query-blind floor (a query-blind model is additive)."""
    family = build_family("exhaustive", m=m, length=3, query_position=query)
    floor = additive_floor(family)
    assert _rectangle_bound(family) <= floor <= minimax_floor(family)


# -- the verdicts ----------------------------------------------------------------------------


def _rows(rank: int, errors: list[float]) -> list[dict]:
    return [
        {"rank": rank, "seed": s, "max_error": e, "final_loss": e, "final_power": 8.0, "rank_argument": rank}
        for s, e in enumerate(errors)
    ]


QB = {"floor": "3/2", "power": 8.0, "loss": 1.0, "max_error": 1.9753}


@pytest.mark.parametrize("kind", [None, "normalised kernel", "additive", *RANK_FREE])
def test_verdicts_by_kind_exhaustively(kind):
    """Every rank below, at and above the certificate, every mix of exact, collapsed and
    failed seeds: additive is certified at every rank, 'at the wall' only for a normalised
    kernel (or a probe that did not check), rank-free kinds only exact or not fitted."""
    structure_ = {"kind": kind, "additive_floor": "3/2"} if kind else None
    for rank, mix in itertools.product([4, 16, 64], itertools.product([0.1, 2.5, 0.9], repeat=3)):
        (v,) = rank_verdicts(_rows(rank, list(mix)), {rank: rank}, 16, QB, None, structure_)
        fits = sum(e < 0.5 for e in mix) >= 2
        assert v["verdict"] in VERDICTS
        if fits:
            assert v["verdict"] == "exact"
        elif kind == "additive":
            assert v["verdict"] == ADDITIVE and not needs_recipe(v, 16, structure_)
        elif kind in RANK_FREE:
            assert v["verdict"] == "not fitted" and needs_recipe(v, 16, structure_)
        else:
            wall = sum(e >= 2.5 for e in mix) < 2 and rank < 16
            assert (v["verdict"] == "at the wall") == wall
    # an additive module on a family an additive model can fit (floor 0) is judged as any other
    (v,) = rank_verdicts(_rows(64, [0.9]), {64: 64}, None, None, None, {"kind": "additive", "additive_floor": "0"})
    assert v["verdict"] == "not fitted"


def test_an_additive_module_probed_end_to_end_is_certified_at_every_rank(tmp_path):
    source = tmp_path / "additive.py"
    source.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Additive(nn.Module):\n"
        "    kernelgap_interface = 'layer'\n\n"
        "    def __init__(self, d_model, rank):\n        super().__init__()\n"
        "        self.q, self.k = nn.Linear(d_model, rank), nn.Linear(d_model, rank)\n"
        "        self.v = nn.Linear(d_model, d_model)\n\n"
        "    def forward(self, x):\n"
        "        a = torch.nn.functional.softplus(self.q(x)) @ torch.nn.functional.softplus(self.k(x)).transpose(-1, -2)\n"
        "        return a @ self.v(x)\n"
    )
    out = tmp_path / "probe"
    meta = run_probe(
        ProbeConfig(
            f"{source}:Additive", ranks={"witness": [2, 64], "ood-n4": []}, steps=6, out=out, executor="inline"
        ),
        log=lambda *_: None,
    )
    (suite,) = meta["suites"]
    assert suite["structure"]["kind"] == "additive" and suite["structure"]["additive_floor"] == "3/2"
    assert suite["structure"]["interaction"] <= ZERO and suite["recipes"] == []  # nothing to search
    section = probe_section(out)
    assert [v["verdict"] for v in section["suites"][0]["verdicts"]] == [ADDITIVE, ADDITIVE]
    text = probe_sentence(section)
    assert (
        "structure: additive" in text and "additive floor 3/2: no rank is exact" in text and "certified r ≥" not in text
    )


class _NaN(Additive):
    def forward(self, x):
        return super().forward(x) * float("nan")


def test_a_module_giving_nan_tells_nothing():
    got = structure(partial(built, _NaN), 24, "layer")
    assert got.kind == "gated/other" and got.interaction is None and got.duplication is None and got.order is None
    assert got.model_dump_json()  # strict JSON: no NaN


def test_only_a_normalised_kernel_or_an_unchecked_probe_shows_the_certificate():
    from kernelgap.experiments.probe.text import rank_certified, structure_text

    for kind in (None, "normalised kernel", "additive", *RANK_FREE):
        s = {"certified_rank": 16, "structure": {"kind": kind} if kind else None}
        assert rank_certified(s) == (16 if kind in (None, "normalised kernel") else None)
    free = structure_text({"kind": "normalised", "interaction": 0.25, "duplication": 1e-15, "order": 1e-15})
    assert (
        free
        == "structure: normalised (interaction 0.25, duplication 1e-15, order 1e-15; rank-free: the lower bound does not cover it)"
    )


def test_the_headline_says_the_rank_a_recipe_made_exact_as_the_verdicts_do():
    """A suite whose schedule reached no rank but whose recipe made rank 16 exact: the sentence,
    the conclusions and the overview table all say 16 with that schedule, none "not reached"."""
    from kernelgap.experiments.probe.text import conclusions, probe_sentence, transition_text

    verdict = {"rank_argument": 16, "features": 16, "verdict": "exact", "recipe": "lr3", "seeds": 3, "fitted": 3}
    suite = {
        "name": "witness", "criterion": "exact", "ood": False, "transition_rank": None, "max_rank": 16,
        "fitted_runs": 0, "runs": [{}, {}], "baseline_transition": 16, "baseline_max_rank": 16, "diverged": [],
        "recipes": [{"name": "lr3", "schedule": "lr ÷ 3 over 2× steps"}], "verdicts": [verdict],
    }  # fmt: skip
    probe = {"name": "m", "target": "m:M", "class": "M", "interface": "layer", "baseline": "elu1", "suites": [suite]}
    said = transition_text(suite)
    assert said == "16 with lr ÷ 3 over 2× steps (none at the suite's schedule up to 16)"
    assert f"exact from rank {said}" in probe_sentence(probe) and "at no rank" not in probe_sentence(probe)
    assert conclusions({"probes": [probe]})["m, witness: exact from rank"] == said
    unfit = {**suite, "verdicts": [{**verdict, "verdict": "not fitted", "recipe": None, "max_error": 2.0}]}
    assert transition_text(unfit) == "not reached up to 16"
    assert "at no rank up to 16" in probe_sentence({**probe, "suites": [unfit]})
