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
        "certified_rank": 16, "baseline_transition": 16, "baseline_max_rank": 32, "max_rank": 32,
    "recipes": [{"name": "lr3", "schedule": "lr × 3", "seed": 0}],
    }  # fmt: skip


def verdict(rank: int, text: str, features=None, recipe=None, fitted=3, tried=()) -> dict:
    return {
        "rank_argument": rank, "features": features or rank, "verdict": text, "recipe": recipe, "seeds": 3,
        "fitted": fitted, "collapsed": 3 if text == "collapsed" else 0, "tried": [{"recipe": t} for t in tried],
    }  # fmt: skip


def probe(name: str, target: str, s: dict, args=None) -> dict:
    ood = {**s, "name": "ood-n4", "ood": True}
    return {"name": name, "target": target, "baseline": "elu1", "suites": [s, ood], "args": args or {}}


SUMMARY = {
    "probes": [
        probe("mine", "kernelgap.probe.examples:Elu1LinearAttention", {**suite("normalised kernel", [verdict(8, "at the wall"), verdict(16, "exact")], 16), "baseline_max_rank": 16, "baseline_transition": None}),
        probe("dpfp", "kernelgap.probe.zoo:FlaLinearAttention", suite("gated/other", [verdict(8, "exact", 64, "lr3")])),
        probe("sum", "/tmp/additive.py:Additive", suite("additive", [verdict(4, ADDITIVE), verdict(32, ADDITIVE)], floor="3/2")),
        probe("old", "performer_pytorch:SelfAttention", suite(None, [verdict(32, "collapsed", fitted=0)])),
        probe("mha", "kernelgap.probe.examples:SoftmaxAttention", suite("normalised", [verdict(16, "exact", None)], 16), {"d_model": "d_model"}),
        probe("gla", "kernelgap.probe.layers:GatedLinearAttention", suite("gated/other", [verdict(8, "not fitted", fitted=1, tried=["lr3"]), verdict(16, "exact", fitted=2)], 16)),
    ]
}  # fmt: skip


def test_each_module_is_one_row_with_its_kind_exactness_and_certificate():
    rows = {r["module"]: r for r in meter_rows(SUMMARY)}
    assert list(rows) == ["mine", "dpfp", "sum", "old", "mha", "gla", "elu1 (built-in)"]  # OOD suites, repeats out
    assert rows["mine"] == {
        "library": "kernelgap", "module": "mine", "suite": "witness", "kind": "normalised kernel",
        "exact at": 16, "tried up to": 16, "verdict": "exact", "seeds exact": "3/3", "certificate": 16,
    }  # fmt: skip
    # a recipe's exact rank counts, at its true feature count, on its one seed; the certificate
    # does not bind a gated layer
    assert rows["dpfp"]["verdict"] == "exact with lr × 3 (seed 0 only; 3 of 3 at the suite's schedule)"
    assert (rows["dpfp"]["exact at"], rows["dpfp"]["certificate"], rows["dpfp"]["library"]) == (
        64,
        "does not bind",
        "fla-core",
    )
    assert (rows["sum"]["verdict"], rows["sum"]["exact at"], rows["sum"]["library"]) == (ADDITIVE, None, "file")
    # a verdict that is not exact says what was tried, here nothing: the recipe search would make it firm
    assert (rows["old"]["kind"], rows["old"]["verdict"], rows["old"]["certificate"]) == (
        "unchecked",
        "collapsed (no recipe search)",
        16,
    )
    assert rows["old"]["seeds exact"] == "0/3"
    # torch's softmax through kernelgap's example: rank-free, exact, no certificate, never at the wall
    assert {k: rows["mha"][k] for k in ("library", "exact at", "tried up to", "verdict", "certificate")} == {
        "library": "torch", "exact at": "rank-free", "tried up to": None, "verdict": "exact",
        "certificate": "does not bind",
    }  # fmt: skip
    # a reference layer: exact at its keys, two seeds of three (an edge note: not firm)
    assert rows["gla"]["library"] == "reference (plain torch)"
    assert (rows["gla"]["exact at"], rows["gla"]["seeds exact"]) == (16, "2/3")
    assert rows["gla"]["verdict"] == "exact (at the edge: 2 of 3 seeds exact)"
    # the baseline's row is that of the probe that tried it at the most ranks (not the first)
    assert (rows["elu1 (built-in)"]["exact at"], rows["elu1 (built-in)"]["tried up to"]) == (16, 32)


def test_library_of_a_target():
    assert library_of({"target": "performer_pytorch:SelfAttention"}) == "performer_pytorch"
    assert library_of({"target": "torch.nn:MultiheadAttention"}) == "torch"
    assert library_of({"target": "models/attn.py:Mine"}) == "file"


def test_the_figure_is_drawn_and_nothing_without_probes(tmp_path):
    assert draw_meter(SUMMARY, tmp_path) == ["wall-meter.png", "wall-meter.svg"]
    assert (tmp_path / "wall-meter.png").stat().st_size > 0
    assert draw_meter({"probes": []}, tmp_path / "none") == []


def test_a_failure_s_row_states_its_cause_as_the_probe_does():
    """A verdict short of exact carries its cause (the twin's, here) in the meter's cell, and a
    verdict without an explanation carries none."""
    failing = {**verdict(32, "collapsed", fitted=0), "twin": "collapsed", "twin_map": "favor", "ablations": []}
    summary = {"probes": [probe("performer", "performer_pytorch:SelfAttention", suite("normalised kernel", [failing]))]}
    (row, _) = meter_rows(summary)
    assert row["verdict"] == (
        "collapsed (no recipe search); cause: the kernel, not the library "
        "(kernelgap's own favor in the same wrapper: collapsed too)"
    )
    assert "cause" not in meter_rows(SUMMARY)[3]["verdict"]
