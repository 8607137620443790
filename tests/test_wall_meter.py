"""The wall meter: one row per probed module and suite (its library, the structure check's kind,
the features at which it is first exact, its verdict, the certificate where it binds), the
built-in baseline once per suite, and its figure."""

from __future__ import annotations

from kernelgap.experiments.probe.meter import draw_meter, library_of, meter_rows
from kernelgap.probe.verdicts import ADDITIVE


def suite(kind: str | None, verdicts: list[dict], transition=None, floor=None) -> dict:
    structure = None if kind is None else {"kind": kind, "additive_floor": floor}
    return {
        "name": "witness", "ood": False, "structure": structure, "verdicts": verdicts, "transition_rank": transition,
        "certified_rank": 16, "baseline_transition": 16, "baseline_max_rank": 32, "max_rank": 32, "recipes": [],
    }  # fmt: skip


def verdict(rank: int, text: str, features=None, recipe=None) -> dict:
    return {"rank_argument": rank, "features": features or rank, "verdict": text, "recipe": recipe}


def probe(name: str, target: str, s: dict) -> dict:
    ood = {**s, "name": "ood-n4", "ood": True}
    return {"name": name, "target": target, "baseline": "elu1", "suites": [s, ood]}


SUMMARY = {
    "probes": [
        probe("mine", "kernelgap.probe.examples:Elu1LinearAttention", suite("normalised kernel", [verdict(8, "at the wall"), verdict(16, "exact")], 16)),
        probe("dpfp", "kernelgap.probe.zoo:FlaLinearAttention", suite("gated/other", [verdict(8, "exact", 64, "lr3")])),
        probe("sum", "/tmp/additive.py:Additive", suite("additive", [verdict(4, ADDITIVE), verdict(32, ADDITIVE)], floor="3/2")),
        probe("old", "performer_pytorch:SelfAttention", suite(None, [verdict(32, "collapsed")])),
    ]
}  # fmt: skip


def test_each_module_is_one_row_with_its_kind_exactness_and_certificate():
    rows = {r["module"]: r for r in meter_rows(SUMMARY)}
    assert list(rows) == ["mine", "dpfp", "sum", "old", "elu1 (built-in)"]  # OOD suites and repeats left out
    assert rows["mine"] == {
        "library": "kernelgap", "module": "mine", "suite": "witness", "kind": "normalised kernel",
        "exact at": 16, "tried up to": 16, "verdict": "exact", "certificate": 16,
    }  # fmt: skip
    # a recipe's exact rank counts, at its true feature count; the certificate does not bind a gated layer
    assert (rows["dpfp"]["exact at"], rows["dpfp"]["certificate"], rows["dpfp"]["library"]) == (
        64,
        "does not bind",
        "fla-core",
    )
    assert (rows["sum"]["verdict"], rows["sum"]["exact at"], rows["sum"]["library"]) == (ADDITIVE, None, "file")
    assert (rows["old"]["kind"], rows["old"]["verdict"], rows["old"]["certificate"]) == ("unchecked", "collapsed", 16)
    assert (rows["elu1 (built-in)"]["exact at"], rows["elu1 (built-in)"]["tried up to"]) == (16, 32)


def test_library_of_a_target():
    assert library_of({"target": "performer_pytorch:SelfAttention"}) == "performer_pytorch"
    assert library_of({"target": "torch.nn:MultiheadAttention"}) == "torch"
    assert library_of({"target": "models/attn.py:Mine"}) == "file"


def test_the_figure_is_drawn_and_nothing_without_probes(tmp_path):
    assert draw_meter(SUMMARY, tmp_path) == ["wall-meter.png", "wall-meter.svg"]
    assert (tmp_path / "wall-meter.png").stat().st_size > 0
    assert draw_meter({"probes": []}, tmp_path / "none") == []
