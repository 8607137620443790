"""Profiles: ``profile.toml`` (package data, or a user folder) and where each sweep file is.

``profile.toml`` lists the experiments in the order they run (``experiments = [...]``)
and sets their settings (a ``[name]`` table per experiment that has settings, and the
keys an experiment owns, such as ``[[probes]]``).  The sweep file of experiment ``E``
is ``DIR/E.toml`` when the profile folder holds one, else the experiment folder's
``<profile>.toml``, else its ``sweep.toml``.  An experiment that is not built in is a
folder of the profile: ``DIR/E/experiment.py`` (:func:`.registry.load_folder`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, create_model

from ..errors import ConfigError
from ..io import load_toml, plain_name
from ..validation import Config
from .base import Experiment
from .registry import builtin, load_folder


def builtin_profiles() -> Path:
    """The folder of the profiles shipped with the package."""
    return Path(str(resources.files("kernelgap.experiments") / "profiles"))


def default_settings(registry: dict[str, Experiment]) -> dict[str, dict]:
    """Every experiment's settings at their defaults (``profile_keys`` parsed from nothing)."""
    return {
        name: {
            **copy.deepcopy(dict(e.settings)),
            **{key: e.profile_parser(key)(None, Path("profile.toml")) for key in e.profile_keys},
        }
        for name, e in registry.items()
        if e.settings or e.profile_keys
    }


@dataclass
class Profile:
    """One profile: its name, folder, experiments in order and their settings."""

    name: str
    folder: Path
    experiments: list[str]
    settings: dict[str, dict] = field(default_factory=lambda: default_settings(builtin()))
    registry: dict[str, Experiment] = field(default_factory=builtin)

    def experiment(self, name: str) -> Experiment:
        return self.registry[name]

    def sweep_file(self, experiment: str) -> Path | None:
        """The experiment's sweep file, or None for an experiment without training."""
        path = self.folder / f"{experiment}.toml"
        if path.is_file():
            return path
        exp = self.registry.get(experiment)
        return exp.sweep_file(self.name) if exp is not None else None

    @property
    def user_experiments(self) -> dict[str, str]:
        """The experiments this profile's folder brings: ``{name: folder}``."""
        builtins = builtin()
        return {
            name: str(self.registry[name].folder)
            for name in self.experiments
            if name not in builtins and self.registry[name].folder is not None
        }


class ProfileHead(Config):
    """The key of ``profile.toml`` that says which experiments (and so which other keys) it
    has; the rest is checked by :func:`profile_model` once they are known."""

    experiments: Annotated[list[str], Field(min_length=1, description="the experiments, in the order they run")]


def profile_model(registry: dict[str, Experiment]) -> type[Config]:
    """The model of a whole ``profile.toml`` for ``registry``: ``experiments``, a ``[name]``
    table for each experiment with settings (its keys those settings) and each key an
    experiment owns (its value read by the experiment's own parser)."""
    tables = {
        name: (
            create_model(name, __base__=Config, **{k: (e.setting_types.get(k, Any), None) for k in e.settings}) | None,
            None,
        )
        for name, e in registry.items()
        if e.settings
    }
    owned = {key: (Any, None) for e in registry.values() for key in e.profile_keys}
    return create_model("Profile", __base__=ProfileHead, **tables, **owned)


def profile_names() -> list[str]:
    return sorted(p.parent.name for p in builtin_profiles().glob("*/profile.toml"))


def load_profile(name: str | Path) -> Profile:
    """A built-in profile by name, or a folder holding ``profile.toml``."""
    folder = Path(name) if Path(name).is_dir() else builtin_profiles() / str(name)
    path = folder / "profile.toml"
    if not path.exists():
        raise ConfigError(
            f"unknown profile {str(name)!r}; choose from {', '.join(profile_names())} "
            "or give a folder holding profile.toml"
        )
    data = load_toml(path, "profile", ConfigError)
    experiments = _parsed(ProfileHead, {k: v for k, v in data.items() if k == "experiments"}, path).experiments
    for exp in experiments:  # each is a folder of the results: it may not lead out of --out
        plain_name(exp, f"{path}: experiment", ConfigError)
    registry = builtin()
    for exp in experiments:
        if exp in registry:
            continue
        if (folder / exp / "experiment.py").is_file():
            registry[exp] = load_folder(folder / exp)
        elif (folder / f"{exp}.toml").is_file():  # a sweep and nothing else: no report of its own
            registry[exp] = Experiment(name=exp, title=exp)
        else:
            raise ConfigError(
                f"{path}: unknown experiment {exp!r} (built in: {', '.join(registry)}; or a "
                f"folder {exp}/ beside profile.toml holding experiment.py, or a sweep file {exp}.toml)"
            )
    settings = _settings(data, registry, path)
    profile = Profile(folder.name, folder, experiments, settings, registry)
    for exp in experiments:
        if profile.sweep_file(exp) is None and registry[exp].step_reads_sweep:
            raise ConfigError(
                f"{path}: experiment {exp!r} has no sweep file for this profile ({exp}.toml beside "
                f"profile.toml, or {profile.name}.toml or sweep.toml in its folder), and its step reads the sweep's runs"
            )
        if profile.sweep_file(exp) is None and not registry[exp].step:
            raise ConfigError(
                f"{path}: experiment {exp!r} has no sweep file ({exp}.toml beside profile.toml, "
                f"or {profile.name}.toml or sweep.toml in its folder) and no step of its own"
            )
    return profile


def _parsed(model: type[Config], data: dict, path: Path):
    try:
        return model.parse(data, where="")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _settings(data: dict, registry: dict[str, Experiment], path: Path) -> dict[str, dict]:
    """The ``[name]`` tables and owned keys of ``profile.toml`` (:func:`profile_model`) over
    every experiment's defaults."""
    parsed = _parsed(profile_model(registry), data, path)
    settings = default_settings(registry)
    owners = {key: name for name, e in registry.items() for key in e.profile_keys}
    for section in [k for k in data if k != "experiments"]:
        value = getattr(parsed, section)
        if section in owners:
            settings[owners[section]][section] = registry[owners[section]].profile_parser(section)(value, path)
        else:
            settings[section].update({key: getattr(value, key) for key in value.model_fields_set})
    return settings
