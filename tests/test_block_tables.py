"""The trainer's fast path: tables on the block of pairs a family uses equal the dense
reference tables (predictions and gradients), and reading the stop marks every k steps
changes no result."""

from __future__ import annotations

import pytest
import torch

from kernelgap.models import FEATURE_MAPS, build_model
from kernelgap.task import build_family
from kernelgap.training import TrainConfig, default_model
from kernelgap.training.trainer import Scored, StackTrainer

FAMILIES = {
    "witness": lambda: build_family("witness"),
    "ood": lambda: build_family("ood", n=4, queries_per_class=4),
    "final": lambda: build_family("ood", n=4, queries_per_class=4, reading="final"),
    "all-positions": lambda: build_family("exhaustive", m=3, length=3),
    "length-1": lambda: build_family("exhaustive", m=3, length=1),  # no key but the query: an empty block
}
SPECS = [dict(feature_map=fm, rank=6) for fm in sorted(FEATURE_MAPS)] + [
    dict(kind="softmax"),
    dict(feature_map="mlp_exp", rank=4, heads=3),
    dict(feature_map="table", rank=5, causal=True),
    dict(feature_map="elu1", rank=5, position_dependent=True),
]


def _both(model, family):
    tokens = torch.from_numpy(family.tokens).double()
    index = torch.from_numpy(family.index)
    pos = family.scored_positions
    plan = model.plan(tokens, index, pos)
    return model.predict(tokens, index, pos), model.predict(tokens, index, pos, plan=plan), plan


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "-".join(f"{v}" for v in s.values()))
def test_block_predictions_and_gradients_equal_the_dense_tables(family, spec):
    fam = FAMILIES[family]()
    model = build_model(
        default_model(**spec), fam.m, fam.length, seeds=[0, 1], vocabulary=fam.tokens, dtype=torch.float64
    )
    dense, block, plan = _both(model, fam)
    assert torch.allclose(dense, block, rtol=1e-10, atol=1e-10)
    grads = []
    for out in (dense, block):
        model.zero_grad()
        (out**2).mean().backward(retain_graph=True)
        grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-10)


def test_the_block_is_smaller_where_queries_and_keys_differ():
    fam = build_family("ood", n=8, queries_per_class=16)
    model = build_model(default_model(feature_map="mlp_exp", rank=4), fam.m, 3, seeds=[0])
    plan = Scored.of(fam, torch.float32).plan(model)
    assert plan is not None and plan.size < len(fam.tokens) ** 2 / 2
    everything = build_family("exhaustive", m=3, length=3)  # every token is a query and a key
    model = build_model(default_model(feature_map="mlp_exp", rank=4), 3, 3, seeds=[0])
    assert Scored.of(everything, torch.float32).plan(model) is None  # the dense tables are no larger


def test_verdicts_agree_with_the_dense_path_on_calibration_runs():
    fam = build_family("witness")
    cfg = TrainConfig(lr=3e-2, mse_steps=300, max_steps=600)
    verdicts = []
    for planned in (False, True):
        model = build_model(
            default_model(feature_map="table", rank=16),
            fam.m,
            3,
            seeds=[0, 1, 2],
            ranks=[8, 16, 16],
            vocabulary=fam.tokens,
        )
        results = StackTrainer(model, Scored.of(fam, torch.float32, planned=planned), cfg).run()
        verdicts.append([r.train["exact"] for r in results])
    assert verdicts[0] == verdicts[1] and verdicts[0][0] is False and any(verdicts[0][1:])


def test_reading_the_stop_marks_every_k_steps_changes_no_result():
    fam = build_family("hadamard", m=12, n=4)  # certified r ≥ 4: rank 1 never stops, 4 and 6 do, apart
    test = build_family("hadamard", m=12, n=4, reading="final")
    cfg = TrainConfig(lr=3e-2, mse_steps=300, max_steps=600, stop_below=0.5)
    out = []
    for every in (1, 7, 1000):
        model = build_model(
            default_model(feature_map="table", rank=6),
            fam.m,
            3,
            seeds=[0, 1, 2, 3],
            ranks=[1, 4, 6, 6],
            vocabulary=fam.tokens,
            dtype=torch.float64,
        )
        res = StackTrainer(
            model, Scored.of(fam, torch.float64), cfg, Scored.of(test, torch.float64), check_every=every
        ).run()
        out.append([(r.status, r.steps, r.train, r.test) for r in res])
    assert out[0] == out[1] == out[2]
    assert {s for s, *_ in out[0]} == {"ok"} and len({st for _, st, *_ in out[0]}) > 1  # members stop apart


def test_a_stopped_member_keeps_its_parameters():
    fam = build_family("hadamard", m=12)
    model = build_model(
        default_model(feature_map="table", rank=4),
        fam.m,
        3,
        seeds=[0, 1],
        ranks=[4, 4],
        vocabulary=fam.tokens,
        dtype=torch.float64,
    )
    trainer = StackTrainer(model, Scored.of(fam, torch.float64), TrainConfig(lr=3e-2, mse_steps=0, max_steps=0))
    trainer.active[0] = False
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        trainer.train.errors(model).square().mean(dim=(1, 2)).sum().backward()
        trainer.hold_stopped(list(model.parameters()), opt)
        opt.step()
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p[: p.shape[0] // 2], b[: p.shape[0] // 2])  # member 0: frozen
        assert not torch.equal(p[p.shape[0] // 2 :], b[p.shape[0] // 2 :])  # member 1: trained
