"""The model of ``summary.json``: the part every reproduction shares (:class:`SummaryBase`)
and each registered experiment's section model under its key (sharing a key merges them).
Its JSON schema and the check of a summary read back are generated from the models
(docs/formats.md, "summary.json")."""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, create_model

from ..experiments.registry import experiments as registered
from ..validation import JsonNumber, Record, json_at_least, problem
from .record import Invocation
from .summary import SCHEMA_VERSION


class ExperimentTime(Record):
    """Where one experiment's time went: its runs, their training and its step."""

    runs: json_at_least(0)
    train_s: JsonNumber
    step_s: JsonNumber


class Timing(Record):
    """Where a reproduction's time went: the sweeps, then each experiment."""

    sweeps_s: JsonNumber
    experiments: dict[str, ExperimentTime]


class MapFacts(Record):
    """A feature map's facts as a run record states them (colour, citation, learning rate)."""

    name: str
    color: str
    citation: str
    default_lr: JsonNumber | None = None
    nonnegative: bool | None = None
    log_space: bool | None = None


class SummaryBase(Record):
    """kernelgap reproduction summary: the part every reproduction shares (each experiment
    adds the model of its section)."""

    schema_version: Literal[SCHEMA_VERSION]
    version: str
    profile: str
    commands: list[str] | None = None
    wall_time_s: JsonNumber | None = None
    invocations: list[Invocation] | None = None
    timing: Timing | None = None
    paper: dict[str, Any]
    feature_maps: dict[str, MapFacts] | None = None


def summary_model(experiments=None) -> type[BaseModel]:
    """The model a summary of these experiments (default: the built-in ones) follows."""
    exps = registered() if experiments is None else experiments
    return _summary_model(tuple((e.summary_key, e.schema) for e in exps if e.section is not None))


@functools.cache
def _summary_model(sections: tuple) -> type[BaseModel]:
    merged: dict[str, Any] = {}
    for key, kind in sections:
        kind = Any if kind is None else kind
        merged[key] = _merge(key, merged[key], kind) if key in merged else kind
    fields: dict[str, Any] = {key: (kind, ...) for key, kind in merged.items()}
    return create_model("Summary", __base__=SummaryBase, __doc__=SummaryBase.__doc__, **fields)


def _merge(key: str, first, second):
    """One model with both sections' fields (null where ``second`` may be); else ``second``."""
    models = [_model_in(first), _model_in(second)]
    if None in models:
        return second
    both = create_model(f"{key.title()}Section", __base__=tuple(models))
    return both | None if type(None) in typing.get_args(second) else both


def _model_in(kind) -> type[BaseModel] | None:
    options = typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,)
    found = [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]
    return found[0] if len(found) == 1 else None


def summary_schema(experiments=None) -> dict:
    """The JSON schema (draft 2020-12) of :func:`summary_model`."""
    schema = summary_model(experiments).model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def summary_problem(summary, experiments=None) -> str | None:
    """The first place where ``summary`` breaks its model (``witness.runs.0.rank: …``), or ``None``."""
    return problem(summary_model(experiments), summary)


def probe_summary_problem(summary) -> str | None:
    """The same for the summary of a probe folder (``{"profile": …, "probes": [one]}``)."""
    return problem(_probe_summary_model(), summary)


@functools.cache
def _probe_summary_model() -> type[BaseModel]:
    probe = next(e for e in registered() if e.name == "probe")
    return create_model("ProbeSummary", __base__=Record, profile=(str | None, ...), probes=(probe.schema, ...))


def section_schema(experiment) -> dict:
    """The JSON schema of one experiment's section, generated from its model."""
    return TypeAdapter(Any if experiment.schema is None else experiment.schema).json_schema()


def section_problem(experiment, value) -> str | None:
    """Where one experiment's section breaks its model (named from its key), or ``None``."""
    return problem(_section_model(experiment.summary_key, experiment.schema), {experiment.summary_key: value})


@functools.cache
def _section_model(key: str, kind) -> type[BaseModel]:
    return create_model("Section", __base__=Record, **{key: (Any if kind is None else kind, ...)})
