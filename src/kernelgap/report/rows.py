"""The rows several experiments' sections of ``summary.json`` share, as models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ..validation import JsonInt, JsonNumber, Section, json_at_least

#: A share: a number in [0, 1].
Share = Annotated[JsonNumber, Field(ge=0, le=1)]


class RunRow(Section):
    """One trained run as :func:`~kernelgap.report.criteria.run_row` reads its record: the
    test keys only where it was tested on a pool, the sign use only of a signed kernel."""

    id: str
    feature_map: str
    kind: Literal["kernel", "softmax", "module"]
    rank: json_at_least(1)
    heads: JsonInt | None
    features: JsonInt | None
    signed: bool
    seed: JsonInt
    status: Literal["ok", "diverged"]
    steps: JsonInt
    wall_time_s: JsonNumber
    family: str
    params: dict[str, Any]
    family_sha256: str | None
    max_error: JsonNumber | None
    exact_seq_acc: Share | None
    mean_abs_error: JsonNumber | None
    tries: json_at_least(1)
    distilled: bool
    pruned_from: JsonInt | None
    exact: bool
    test_max_error: JsonNumber | None = None
    test_exact_seq_acc: Share | None = None
    test_exact: bool | None = None
    guarded_share: Share | None = None
    min_abs_denominator: JsonNumber | None = None
    negative_denominator_share: Share | None = None
    negative_weight_share: Share | None = None


class SoftmaxRow(Section):
    """One trained softmax run: its seed, train max error and verdict."""

    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool


class Transition(Section):
    """One map: the smallest features (or rank) at which most seeds pass, and the largest tried."""

    transition: JsonInt | None
    max_tried: JsonInt


class Growth(Section):
    """A least-squares fit of log2(rank) against m over ``points`` points:
    ``log2_per_m·m + intercept``."""

    log2_per_m: JsonNumber
    intercept: JsonNumber
    points: JsonInt
