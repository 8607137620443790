"""The probe experiment's settings: the ``[[probes]]`` entries of ``profile.toml``, each a
module to probe with its defaults (docs/experiments.md, "Probe")."""

from __future__ import annotations

import copy
from pathlib import Path

from ...errors import ConfigError

#: One entry of ``[[probes]]``: a module the probe experiment runs, with its defaults.
PROBE: dict = {
    "name": "",
    "target": "",
    "kwargs": {},
    "interface": None,
    "args": {},
    "output": None,
    "profile": "quick",
    "ranks": {},
    "seeds": [],
    "steps": None,
    "lr": None,
    "requires": None,
    "recipes": True,
}
DEFAULT_PROBES = [{**PROBE, "name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"}]


def parse_probes(entries, path: Path) -> list[dict]:
    """``[[probes]]``: each a module to probe (``name`` and ``target`` required)."""
    if entries is None:
        return copy.deepcopy(DEFAULT_PROBES)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: 'probes' must be an array of tables ([[probes]])")
    out = []
    for k, entry in enumerate(entries):
        unknown = set(entry) - set(PROBE)
        if unknown:
            raise ConfigError(f"{path}: unknown key probes[{k}].{sorted(unknown)[0]}")
        if not entry.get("name") or not entry.get("target"):
            raise ConfigError(f"{path}: probes[{k}] needs a name and a target")
        searched = entry.get("recipes", True)
        if not isinstance(searched, bool) and not (
            isinstance(searched, list) and all(isinstance(x, str) for x in searched)
        ):
            raise ConfigError(f"{path}: probes[{k}].recipes must be true, false or a list of suite names")
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out
