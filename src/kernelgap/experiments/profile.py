"""Profiles: ``profile.toml`` and the sweep files beside it (package data, or a user folder)."""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import ConfigError

#: Settings of the after-sweep steps that are not sweep fields, with their defaults.
SETTINGS: dict[str, dict] = {
    "length": {"m": 4},
    "bound_curve": {"code": "ladder", "m": "32..96..16", "queries": 2048},
    "precision": {"bits": [2, 3, 4, 5, 6, 8, 10, 12, 16], "quantizers": ["uniform"]},
}
#: One entry of ``[[probes]]``: a module the ``probe`` experiment runs, with its defaults.
PROBE: dict = {"name": "", "target": "", "kwargs": {}, "interface": None, "args": {}, "output": None,
               "profile": "quick", "ranks": {}, "seeds": [], "steps": None, "lr": None, "requires": None}
DEFAULT_PROBES = [{**PROBE, "name": "decayed", "target": "kernelgap.probe.examples:DecayedLinearAttention"}]


def builtin_profiles() -> Path:
    """The folder of the profiles shipped with the package."""
    return Path(str(resources.files("kernelgap.experiments") / "profiles"))


@dataclass
class Profile:
    """One profile: its name, folder, experiments in order and step settings."""

    name: str
    folder: Path
    experiments: list[str]
    settings: dict[str, dict] = field(default_factory=lambda: copy.deepcopy(SETTINGS))
    probes: list[dict] = field(default_factory=lambda: copy.deepcopy(DEFAULT_PROBES))

    def sweep_file(self, experiment: str) -> Path | None:
        """The experiment's sweep file, or None for an experiment without training."""
        path = self.folder / f"{experiment}.toml"
        return path if path.is_file() else None


def _probes(entries, path: Path) -> list[dict]:
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
        out.append({**copy.deepcopy(PROBE), **entry})
    if len({e["name"] for e in out}) != len(out):
        raise ConfigError(f"{path}: two probes share a name")
    return out


def profile_names() -> list[str]:
    return sorted(p.parent.name for p in builtin_profiles().glob("*/profile.toml"))


def load_profile(name: str | Path) -> Profile:
    """A built-in profile by name, or a folder holding ``profile.toml``."""
    folder = Path(name) if Path(name).is_dir() else builtin_profiles() / str(name)
    path = folder / "profile.toml"
    if not path.is_file():
        raise ConfigError(f"unknown profile {str(name)!r}; choose from {', '.join(profile_names())} "
                          "or give a folder holding profile.toml")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    experiments = data.pop("experiments", None)
    if not experiments or not isinstance(experiments, list) or not all(isinstance(e, str) for e in experiments):
        raise ConfigError(f"{path}: 'experiments' must be a non-empty list of names")
    probes = _probes(data.pop("probes", None), path)
    settings = copy.deepcopy(SETTINGS)
    for section, values in data.items():
        if section not in SETTINGS or not isinstance(values, dict):
            raise ConfigError(f"{path}: unknown section {section!r} (expected {', '.join(SETTINGS)})")
        for key, value in values.items():
            if key not in SETTINGS[section]:
                raise ConfigError(f"{path}: unknown key {section}.{key}")
            settings[section][key] = value
    profile = Profile(folder.name, folder, experiments, settings, probes)
    from .hooks import HOOKS  # the registry of after-sweep steps

    for exp in experiments:
        if profile.sweep_file(exp) is None and exp not in HOOKS:
            raise ConfigError(f"{path}: experiment {exp!r} has no {exp}.toml beside it and no step of its own")
    return profile
