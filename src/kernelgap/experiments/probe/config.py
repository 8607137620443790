"""The probe experiment's settings: the ``[[probes]]`` entries of ``profile.toml``, each a
module to probe with its defaults (:class:`ProbeEntry`; docs/experiments.md, "Probe")."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ...errors import ConfigError, KernelgapError
from ...probe.config import TimeLimitError, time_limits
from ...validation import Config, Int, Number, checked, fits


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
    lr: Number | None = None
    requires: str | None = None
    recipes: Recipes = True
    time_limits: dict[str, Number] = {}


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
            time_limits(entry.get("time_limits"))
        except KernelgapError as exc:
            raise ConfigError(
                f"{path}: probes[{k}]: {exc}" if isinstance(exc, TimeLimitError) else f"{path}: {exc}"
            ) from None
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out
