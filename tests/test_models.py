"""Attention models: stacking, heads, positions, causal reading, guard (docs/theory.md, "The models")."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelgap.models import (
    FEATURE_MAPS,
    KernelSpec,
    ModuleModelSpec,
    SoftmaxSpec,
    build_model,
)
from kernelgap.models.build import parameter_count
from kernelgap.task import build_family

FAM = build_family("exhaustive", m=3, length=3)
TOK = torch.from_numpy(FAM.tokens).double()
IDX = torch.from_numpy(FAM.index)


def build(spec, seeds, ranks=None):
    return build_model(spec, 3, 3, seeds=seeds, ranks=ranks, vocabulary=FAM.tokens, dtype=torch.float64)


@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_member_of_a_stack_equals_model_alone(name):
    """Same seed → same predictions alone or stacked, ranks padded with masks."""
    maskable = FEATURE_MAPS[name].maskable
    ranks = [3, 8, 5] if maskable else None
    spec = KernelSpec(feature_map=name, rank=8, heads=2)
    stack = build(spec, [11, 12, 13], ranks).predict(TOK, IDX)
    for e, seed in enumerate([11, 12, 13]):
        alone = build(KernelSpec(feature_map=name, rank=(ranks or [8] * 3)[e], heads=2), [seed])
        assert torch.allclose(stack[e], alone.predict(TOK, IDX)[0], rtol=1e-9, atol=1e-9)


def test_softmax_stack_equals_alone():
    spec = SoftmaxSpec(heads=3)
    stack = build(spec, [1, 2]).predict(TOK, IDX)
    assert torch.allclose(stack[1], build(spec, [2]).predict(TOK, IDX)[0])
    assert not torch.allclose(stack[0], stack[1])


def test_dense_forward_equals_indexed_predict():
    model = build(KernelSpec(feature_map="mlp_exp", rank=4), [0])
    dense = torch.from_numpy(FAM.sequences_bits()).double()
    assert torch.allclose(model(dense), model.predict(TOK, IDX), atol=1e-12)


@given(st.integers(1, 4), st.integers(1, 3), st.booleans())
def test_multi_head_shapes(heads, members, positional):
    spec = KernelSpec(feature_map="elu1", rank=4, heads=heads, position_dependent=positional)
    model = build(spec, list(range(members)))
    tables = model.tables(TOK)
    p = 3 if positional else 1
    assert tables.scores.shape == (members, heads, p, len(TOK), len(TOK))
    assert tables.values.shape == (members, heads, p, len(TOK), len(TOK))
    assert model.predict(TOK, IDX).shape == (members, len(IDX), 3)


def test_causal_position_ignores_later_tokens():
    model = build(KernelSpec(feature_map="elu1", rank=4, causal=True), [0])
    first = model.predict(TOK, IDX, positions=[0])[0, :, 0]
    # position 1 attends to itself only: prediction depends on x_1 alone
    per_token = {}
    for row, p in zip(IDX.tolist(), first.tolist()):
        per_token.setdefault(row[0], set()).add(round(p, 9))
    assert all(len(v) == 1 for v in per_token.values())


def test_position_dependent_keys_change_predictions():
    spec = KernelSpec(feature_map="elu1", rank=4, position_dependent=True)
    model = build(spec, [0])
    pred = model.predict(TOK, IDX, positions=[0])[0, :, 0]
    # swapping the two keys changes the prediction when key maps differ per position
    swapped = IDX[:, [0, 2, 1]]
    assert not torch.allclose(pred, model.predict(TOK, swapped, positions=[0])[0, :, 0])


def test_signed_kernel_guard_reports_instead_of_nan():
    model = build(KernelSpec(feature_map="signed", rank=2), [0])
    with torch.no_grad():
        for p in model.scorer.parameters():  # the map's MLP projections
            p.zero_()  # φ ≡ 0: every denominator is zero
    pred = model.predict(TOK, IDX)
    assert torch.isfinite(pred).all()
    assert float(model.kernel_stats(TOK, IDX)["guarded_share"][0]) == 1.0


def test_float32_model_has_float32_tables():
    model = build_model(KernelSpec(feature_map="favor", rank=4), 3, 3, seeds=[0])
    assert model.tables(TOK.float()).scores.dtype == torch.float32


def test_table_maps_read_token_ids_of_a_larger_vocabulary():
    """Training tokens inside the train/test union (the trainer's vocabulary): the ids found
    once, given, or found per call give the same numbers; a token outside is one line."""
    import numpy as np

    from kernelgap.errors import KernelgapError
    from kernelgap.training.trainer import Scored, vocabulary

    train = build_family("ood", n=4, queries_per_class=4)
    test = build_family("ood", n=4, queries_per_class=4, split="test")
    vocab = vocabulary(train, test)
    tok, idx = torch.from_numpy(train.tokens).double(), torch.from_numpy(train.index)
    for name in ("table", "signed_table"):
        model = build_model(
            KernelSpec(feature_map=name, rank=3),
            train.m,
            train.length,
            seeds=[0, 1],
            vocabulary=vocab,
            dtype=torch.float64,
        )
        ids = model.token_ids(tok)
        assert not torch.equal(ids, torch.arange(len(tok)))  # the rows of a larger vocabulary
        assert np.array_equal(vocab[ids.numpy()], train.tokens)
        dense = model.predict(tok, idx, train.scored_positions)
        assert torch.equal(model.predict(tok, idx, train.scored_positions, ids=ids), dense)
        planned = model.predict(tok, idx, plan=model.plan(tok, idx, train.scored_positions))
        assert torch.equal(model.predict(tok, idx, plan=model.plan(tok, idx, train.scored_positions, ids=ids)), planned)
        assert torch.allclose(planned, dense, rtol=1e-12, atol=1e-12)
        for planned_path, ref in ((True, planned), (False, dense)):
            scored = Scored.of(train, torch.float64, planned=planned_path)
            assert torch.equal(scored.errors(model), ref - scored.target)
            assert torch.equal(scored.token_ids(model), ids)
        small = build_model(
            KernelSpec(feature_map=name, rank=3), train.m, train.length, seeds=[0], vocabulary=train.tokens
        )
        with pytest.raises(KernelgapError, match="outside its vocabulary") as info:
            small.predict(torch.from_numpy(test.tokens).float(), torch.from_numpy(test.index))
        assert "\n" not in str(info.value)


def test_the_scorer_owns_its_projections_in_a_checkpoint():
    """The weights load by the scorer's own names (``scorer.q_proj`` …); a layout where the
    map held them (``scorer.feature_map.q_proj``) is not this library's and is refused."""
    for name in ("elu1", "favor", "mlp_exp", "table"):
        trained = build(KernelSpec(feature_map=name, rank=4), [0])
        fresh = build(KernelSpec(feature_map=name, rank=4), [7])
        state = trained.state_dict()
        assert any(k.startswith(("scorer.q_proj.", "scorer.q_table.")) for k in state)
        assert not any(".feature_map.q_" in k for k in state)
        moved = {k.replace("scorer.q_", "scorer.feature_map.q_"): v for k, v in state.items()}
        with pytest.raises(RuntimeError, match="Missing key"):
            fresh.load_state_dict(moved)
        fresh.load_state_dict(state)
        assert torch.equal(fresh.predict(TOK, IDX), trained.predict(TOK, IDX))


@pytest.mark.parametrize(
    "spec",
    [KernelSpec(feature_map=name, rank=5, heads=2, hidden=7) for name in sorted(FEATURE_MAPS)]
    + [SoftmaxSpec(heads=2, score_dim=4), KernelSpec(readout="linear", d_value=3)],
    ids=lambda s: getattr(s, "feature_map", s.kind),
)
def test_the_memory_estimate_counts_the_model_it_builds(spec):
    """The estimate is the construction's own count: every parameter and float buffer of
    the built stack (one key position, the family's tokens as the table's rows)."""
    model = build_model(spec, 3, 1, seeds=[0, 1, 2], vocabulary=FAM.tokens)
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]
    assert parameter_count(spec, m=3, tokens=len(FAM.tokens), members=3) == sum(t.numel() for t in tensors) > 0


def test_a_spec_has_only_its_kinds_fields_and_resolves_its_map_once(monkeypatch):
    from kernelgap.models import feature_maps

    assert "feature_map" not in SoftmaxSpec.model_fields and "score_dim" not in KernelSpec.model_fields
    assert set(ModuleModelSpec.model_fields) == {"kind", "rank", "module"}
    spec = KernelSpec(feature_map="elu1")
    assert spec.map_class is feature_maps.elu1.Elu1

    def no_lookup(name):
        raise AssertionError(f"looked up {name!r} again")

    monkeypatch.setattr(feature_maps, "feature_map_class", no_lookup)  # what a spec looks maps up with
    model = build_model(spec, 3, 3, seeds=[0])  # no further registry look-up
    assert type(model.scorer.feature_map) is feature_maps.elu1.Elu1 and spec.feature_count() == 16
    assert spec.signed_kernel is False and "temperature" not in spec.identity()
