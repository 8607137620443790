"""The registry of experiments: the built-in folders, and those a profile folder brings.

Each built-in experiment is a folder of this package whose ``experiment.py`` defines
``EXPERIMENT`` (:class:`~.base.Experiment`); :data:`BUILTIN` holds every such folder, found
by listing the package, in the order of their :attr:`~.base.Experiment.order` (the order
``summary.json`` lists their sections in and their runs are pooled in), so a new built-in
experiment is a new folder and nothing else (docs/adding-an-experiment.md).  A profile
given by path may hold experiment folders of its own (``DIR/<name>/experiment.py``),
loaded by :func:`load_folder` the same way.  Only the torch-free ``experiment.py`` modules
are imported here; the pipeline loads each step when it runs it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ..errors import ConfigError
from .base import Experiment

#: The package that profile folders' experiments are imported under.
USER_PACKAGE = "kernelgap_profile_experiments"


def _registered(module: types.ModuleType, where: str) -> Experiment:
    """The module's ``EXPERIMENT``, told where its package and folder are."""
    exp = getattr(module, "EXPERIMENT", None)
    folder = Path(module.__file__).parent
    if not isinstance(exp, Experiment):
        raise ConfigError(f"{where}: experiment.py must define EXPERIMENT = Experiment(...)")
    if exp.name != folder.name:
        raise ConfigError(f"{where}: EXPERIMENT is named {exp.name!r}, its folder {folder.name!r}")
    return replace(exp, package=module.__package__, folder=folder)


def _builtin() -> tuple[Experiment, ...]:
    """Every sub-folder of this package that holds an ``experiment.py``, by order (ties by name)."""
    found = [
        _registered(module, module.__name__)
        for module in (
            importlib.import_module(f"{__package__}.{child.name}.experiment")
            for child in importlib.resources.files(__package__).iterdir()
            if child.is_dir() and child.name.isidentifier() and child.joinpath("experiment.py").is_file()
        )
    ]
    return tuple(sorted(found, key=lambda e: (e.order, e.name)))


#: The built-in experiments, in summary order (which is also the order their pools are read in).
BUILTIN: tuple[Experiment, ...] = _builtin()


def builtin() -> dict[str, Experiment]:
    return {e.name: e for e in BUILTIN}


def load_folder(folder: str | Path) -> Experiment:
    """The experiment of a profile folder's ``<name>/`` (its ``experiment.py``), imported as
    a package of its own so that it may import its neighbours (``from .helpers import …``)
    and name its step ``".step:function"``."""
    folder = Path(folder).resolve()
    if not (folder / "experiment.py").is_file():
        raise ConfigError(f"experiment folder {folder} has no experiment.py")
    if folder.name in builtin():
        raise ConfigError(f"{folder}: {folder.name!r} is a built-in experiment; give yours another name")
    if USER_PACKAGE not in sys.modules:
        parent = types.ModuleType(USER_PACKAGE, "Experiments of profile folders (kernelgap reproduce --profile DIR).")
        parent.__path__ = []
        sys.modules[USER_PACKAGE] = parent
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    name = f"{USER_PACKAGE}.{re.sub(r'[^0-9A-Za-z_]', '_', folder.name)}_{digest}"
    if name not in sys.modules:
        package = types.ModuleType(name, f"The experiment folder {folder}.")
        package.__path__ = [str(folder)]
        package.__file__ = str(folder / "__init__.py")
        sys.modules[name] = package
    return _registered(importlib.import_module(f"{name}.experiment"), str(folder / "experiment.py"))


def experiments(user: Mapping[str, str | Path] | None = None) -> list[Experiment]:
    """The built-in experiments, then those of profile folders (``{name: folder}``)."""
    if user is not None and not (isinstance(user, Mapping) and all(isinstance(f, (str, Path)) for f in user.values())):
        raise ConfigError(f"user experiments must be an object of experiment folders, got {user!r}")
    extra = [load_folder(folder) for folder in (user or {}).values()]
    return [*BUILTIN, *extra]
