"""The probe experiment's settings: the ``[[probes]]`` entries of ``profile.toml``, each a
module to probe with its defaults (:class:`ProbeEntry`; docs/experiments.md, "Probe")."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...io import plain_name
from ...limits import MAX_SECONDS
from ...run_values import LearningRate
from ...validation import Config, Int, checked, fits


def _recipes(value) -> bool:
    return fits(bool | list[str], value)


def _ranks(value) -> bool:
    return fits(list[Int] | dict[str, list[Int]], value)


NonEmpty = checked(str, bool, " must be a non-empty string, got {shown}", {"type": "string", "minLength": 1})
#: Ranks for every suite (a list) or per suite name (a table of lists).
Ranks = checked(
    Any,
    _ranks,
    " must be a list of ranks or a table of them by suite name, got {shown}",
    {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "object"}]},
)
#: ``true`` (search every suite's recipes), ``false``, or the suites to search.
Recipes = checked(
    Any,
    _recipes,
    " must be true, false or a list of suite names, got {shown}",
    {"anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}]},
)


#: The phases a probed module is timed in (:data:`kernelgap.probe.config.TIME_LIMITS`, which
#: this light module does not import).
PHASES = ("import", "check", "step")


def _limits(value) -> bool:
    return (
        isinstance(value, dict)
        and set(value) <= set(PHASES)
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= MAX_SECONDS
            for v in value.values()
        )
    )


#: Seconds per phase of the module: ``{import = 60, check = 300, step = 600}``, any of them.
Limits = checked(
    Any,
    _limits,
    f" must be a table of seconds per phase (import, check, step), each in (0, {MAX_SECONDS:,}], got {{shown}}",
    {"type": "object", "propertyNames": {"enum": list(PHASES)}, "additionalProperties": {"type": "number"}},
)


class ProbeEntry(Config):
    """One entry of ``[[probes]]``: a module the probe experiment runs (``name``, ``target``:
    ``module:Class``) with its constructor's ``kwargs``, its interface, argument map and
    output index, the profile whose suites it runs with their ranks, seeds, steps and
    learning rate, the library it ``requires``, the suites whose ``recipes`` are searched and
    the module's ``time_limits`` (seconds per phase: ``import``, ``check``, ``step``)
    (each passed on to :class:`~kernelgap.probe.config.ProbeConfig`, which checks them further)."""

    name: NonEmpty
    target: NonEmpty
    kwargs: dict[str, Any] = {}
    interface: str | None = None
    args: dict[str, Any] = {}
    output: Int | None = None
    profile: str = "quick"
    ranks: Ranks = {}
    seeds: list[Int] = []
    steps: Int | None = None
    lr: LearningRate | None = None
    requires: str | None = None
    recipes: Recipes = True
    time_limits: Limits = {}


#: One entry of ``[[probes]]`` at its defaults (``name`` and ``target`` are required).
PROBE: dict = {name: copy.deepcopy(field.default) for name, field in ProbeEntry.model_fields.items()} | {
    "name": "",
    "target": "",
}
DEFAULT_PROBES = [{**PROBE, "name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"}]


def parse_probes(entries, path: Path) -> list[dict]:
    """``[[probes]]``: each entry checked against :class:`ProbeEntry` and filled in with its
    defaults; the names are distinct."""
    if entries is None:
        return copy.deepcopy(DEFAULT_PROBES)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: 'probes' must be an array of tables ([[probes]])")
    out = []
    for k, entry in enumerate(entries):
        try:
            ProbeEntry.parse(entry, f"probes[{k}]")
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        plain_name(entry["name"], f"{path}: probes[{k}].name", ConfigError)  # the folder probe/<name>/
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out
