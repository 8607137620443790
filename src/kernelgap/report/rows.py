"""The rows several experiments' parts of ``summary.json`` share, as models: a trained run
of a kernel map and a softmax run, as :mod:`kernelgap.report.criteria` reads them from the
run records.

Each experiment's section is a model of these (:class:`~kernelgap.validation.Record`:
the keys named are checked, others let through); the summary's JSON schema is generated
from them (:mod:`kernelgap.reproduction.schema`, docs/formats.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..validation import JsonInt, JsonNumber, Record, json_at_least


class RunRow(Record):
    """One trained run of a kernel map: its rank, seed, train max error and verdict."""

    feature_map: str
    rank: json_at_least(1)
    seed: JsonInt
    max_error: JsonNumber | None
    exact: bool
    exact_seq_acc: Annotated[JsonNumber, Field(ge=0, le=1)] | None
    features: JsonInt | None = None
    signed: bool | None = None
    status: Literal["ok", "diverged"] | None = None


class SoftmaxRow(Record):
    """One trained softmax run: its seed, train max error and verdict."""

    seed: JsonInt
    max_error: JsonNumber
    exact: bool
