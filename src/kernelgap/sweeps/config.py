"""Sweep files: a base run config, a grid and variants, in TOML (docs/formats.md, "Sweep files").

The runs are ``variants × grid`` (one variant, the base, when none is given).  A variant's
value wins over a grid axis of the same key; its family parameters merge into the base's
and the grid's unless it names another family.  Duplicate runs are dropped (a softmax
variant gives one run per seed however many ranks the grid lists).  Every mistake is a
one-line :class:`~kernelgap.errors.ConfigError` naming the key, including more than
:data:`~kernelgap.limits.MAX_SWEEP_RUNS` runs (counted before any is built).  Each run's
sections are validated by the config models; a model field the run's kind does not use may
not be set to other than its default in the base ``[model]`` table or a variant (grid axes
span every kind and may).
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from ..errors import ConfigError, KernelgapError
from ..io import load_toml
from ..limits import MAX_SWEEP_RUNS
from ..models import ModelSpec
from ..models.specs import FIELDS_ONLY
from ..training import FamilySpec, RunConfig, TrainConfig
from ..training.config import EXPLICIT_MODEL_KEYS, TYPES_ONLY
from ..validation import Config, Int

#: Top-level sections and the config model each one fills.
SECTIONS: dict[str, type] = {"family": FamilySpec, "test_family": FamilySpec, "model": ModelSpec, "train": TrainConfig}
#: A schema node naming one of the sweep schema's definitions (``$ref`` once generated).
DEF_KEY = "x-def"


def _ref(name: str):
    """A table whose keys the config models check, run by run (the schema names its model)."""
    return Annotated[dict[str, Any], WithJsonSchema({DEF_KEY: name})]


#: A section of a sweep file: its config model's fields, all optional (checked run by run).
FamilyTable, ModelTable, TrainTable = _ref("FamilySection"), _ref("ModelSpec"), _ref("TrainConfig")
#: Grid axes: each key a non-empty list of values.
GridTable = _ref("Grid")


class Variant(Config):
    """Overrides paired with every grid point; its own grid replaces or extends the sweep's."""

    seed: Int | None = None
    family: FamilyTable | None = None
    test_family: FamilyTable | None = None
    model: ModelTable | None = None
    train: TrainTable | None = None
    grid: GridTable = Field(default_factory=dict)

    def overrides(self) -> dict:
        """The keys the variant sets (as written: nested tables)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set}


class SweepFile(Config):
    """A sweep file's layout; the sections' fields are checked run by run."""

    name: str = Field("sweep", description="a label")
    seed: Int | None = Field(None, description="base seed (usually a grid axis)")
    family: FamilyTable
    test_family: FamilyTable | None = None
    model: ModelTable | None = None
    train: TrainTable | None = None
    grid: GridTable = Field(default_factory=dict)
    variants: Annotated[list[Variant], Field(min_length=1)] = Field(default_factory=lambda: [Variant()])

    def base(self) -> dict:
        """The sections and seed the file sets: every run starts from them."""
        return {k: getattr(self, k) for k in (*SECTIONS, "seed") if k in self.model_fields_set}


@dataclass
class FamilyFiles:
    """Where the family files a sweep names are read from: relative to the sweep file, or
    ``pinned`` (name as written → the results folder's copy), so a resumed sweep reads the
    bytes it began with.  Each name is hashed once (``seen``)."""

    base_dir: str = "."
    pinned: dict[str, str] | None = None
    seen: dict[str, FamilySpec] = field(default_factory=dict)

    def spec(self, written: str, where: str) -> FamilySpec:
        if written not in self.seen:
            if self.pinned is None:
                path = Path(self.base_dir) / written
                if not path.is_file():
                    raise ConfigError(f"{where}.file: family file {path} does not exist")
            elif written in self.pinned:
                path = Path(self.pinned[written])
            else:
                raise ConfigError(
                    f"{where}.file: {written!r} is not one of the family files this "
                    f"results folder holds ({', '.join(map(repr, self.pinned)) or 'none'})"
                )
            self.seen[written] = FamilySpec.from_file(path, name=Path(written).stem)
        return self.seen[written]


@dataclass
class SweepConfig:
    name: str
    base: dict
    grid: dict[str, list]
    variants: list[dict]
    files: FamilyFiles = field(default_factory=FamilyFiles)

    def runs(self) -> list[RunConfig]:
        """Every run of ``variants × grid``, in file order, duplicates removed."""
        out: dict[str, RunConfig] = {}
        for variant in self.variants:
            grid = self._grid(variant)
            fixed = [(k, v) for k, v in variant.items() if not k.startswith("grid.")]
            merged = _merged_params(variant)
            explicit = self._explicit_model_keys(variant, grid)
            axes = list(grid)
            for values in itertools.product(*(grid[a] for a in axes)):
                raw = copy.deepcopy(self.base)
                for key, value in [*zip(axes, values), *fixed]:
                    if key in merged:
                        value = {**_table(raw.get(key.split(".")[0], {}).get("params", {}), key), **value}
                    _set(raw, key, value)
                run = build_run(raw, self.files, explicit)
                out.setdefault(run.run_id(), run)
        return list(out.values())

    def _grid(self, variant: dict) -> dict[str, list]:
        """A variant's grid: the sweep's axes, its own ``grid.*`` axes replacing or extending them."""
        return {**self.grid, **{k[len("grid.") :]: v for k, v in variant.items() if k.startswith("grid.")}}

    def planned(self) -> int:
        """The runs ``variants × grid`` lists, duplicates included."""
        return sum(math.prod(len(axis) for axis in self._grid(variant).values()) for variant in self.variants)

    def _explicit_model_keys(self, variant: dict, grid: dict) -> set[str]:
        """The model fields set other than by a grid axis: the variant's, and the base
        ``[model]`` table's unless the variant or the grid chooses the kind."""
        keys = {k.split(".")[1] for k in variant if k.startswith("model.")}
        base = self.base.get("model")
        if isinstance(base, dict) and "model.kind" not in variant and "model.kind" not in grid:
            keys |= set(base)
        return keys


def load_sweep(path: str | Path, pinned: dict[str, str] | None = None) -> SweepConfig:
    """Read and validate a sweep file, every run resolved once (:class:`FamilyFiles` for ``pinned``)."""
    p = Path(path)
    data = load_toml(p, "sweep config", ConfigError)
    try:
        sweep = parse_sweep(data, FamilyFiles(str(p.resolve().parent), pinned))
        sweep.runs()
    except KernelgapError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return sweep


def sweep_source(target: str | Path, out: str | Path | None) -> tuple[Path, Path]:
    """``(config file, results folder)`` for ``sweep CONFIG --out DIR`` or ``sweep DIR``."""
    target = Path(target)
    if target.is_dir():
        if out is not None and Path(out).resolve() != target.resolve():
            raise ConfigError("give either a config file with --out, or a results folder alone")
        return target / "sweep.toml", target
    if out is None:
        raise ConfigError(f"--out DIR is required to run the sweep {target}")
    return target, Path(out)


def check_sweep(target: str | Path, out: str | Path | None) -> None:
    """Refuse a bad ``sweep CONFIG --out DIR`` before torch is imported."""
    config_path, _ = sweep_source(target, out)
    if not Path(target).is_dir():
        load_sweep(config_path)


def parse_sweep(data: dict, files: FamilyFiles | None = None) -> SweepConfig:
    """Validate a parsed TOML document (:class:`SweepFile`) and walk its grids to their axes."""
    sweep = SweepFile.parse(data, where="")
    grid = _grid_axes(sweep.grid, "grid")
    variants = [_variant(v.overrides(), f"variants.{i}") for i, v in enumerate(sweep.variants)]
    config = SweepConfig(sweep.name, sweep.base(), grid, variants, files or FamilyFiles())
    if config.planned() > MAX_SWEEP_RUNS:  # refused before a run is built
        raise ConfigError(f"variants × grid lists {config.planned():,} runs; a sweep has at most {MAX_SWEEP_RUNS:,}")
    return config


def _merged_params(variant: dict) -> set[str]:
    """The variant's ``*.params`` that merge into the base's (it names no other family)."""
    return {
        f"{section}.params"
        for section in ("family", "test_family")
        if isinstance(variant.get(f"{section}.params"), dict)
        and f"{section}.name" not in variant
        and f"{section}.file" not in variant
    }


def _variant(table: dict, where: str) -> dict:
    """A variant's overrides, flat; its ``grid`` table (axes of its own) as ``grid.*`` keys."""
    out = flatten({k: v for k, v in table.items() if k != "grid"}, whole_params=True)
    out.update({f"grid.{k}": v for k, v in _grid_axes(table.get("grid", {}), f"{where}.grid").items()})
    return out


def _grid_axes(grid: dict, where: str) -> dict[str, list]:
    """A grid table walked down to its axes, each a non-empty list (registry entries expanded)."""
    out = {}
    for key, values in flatten(grid).items():
        if not isinstance(values, list):
            raise ConfigError(f"{where}.{key}: expected a list of values, got {values!r}")
        out[key] = values = _expand_registered(key, values, f"{where}.{key}")
        if not values:
            raise ConfigError(f"{where}.{key}: the grid axis is empty")
    return out


#: In a ``model.feature_map`` axis, ``"*"`` is every registered map and ``"!name"`` removes one.
EVERY_MAP, NOT_MAP = "*", "!"


def _expand_registered(key: str, values: list, where: str) -> list:
    """A ``model.feature_map`` axis with ``"*"`` / ``"!name"`` entries, in registry order."""
    if key != "model.feature_map" or not any(isinstance(v, str) and v[:1] in (EVERY_MAP, NOT_MAP) for v in values):
        return values
    from ..models import FEATURE_MAPS  # the registry imports the maps (and torch)

    names = list(FEATURE_MAPS)
    drop = {v[1:] for v in values if isinstance(v, str) and v.startswith(NOT_MAP)}
    for name in drop:
        if name not in FEATURE_MAPS:
            raise ConfigError(f"{where}: {NOT_MAP}{name}: unknown feature map (choose from {', '.join(names)})")
    out: list = []
    for v in values:
        if isinstance(v, str) and v.startswith(NOT_MAP):
            continue
        out += names if v == EVERY_MAP else [v]
    return [v for i, v in enumerate(out) if v not in drop and v not in out[:i]]


def build_run(raw: dict, files: FamilyFiles | None = None, explicit_model: set[str] | None = None) -> RunConfig:
    """A :class:`RunConfig` from nested plain values, checked by the config models; fields in
    ``explicit_model`` that the model's kind does not use must keep their defaults."""
    files = files or FamilyFiles()
    raw = dict(_test_family_follows(raw))
    for section in ("family", "test_family"):
        if isinstance(raw.get(section), dict):
            raw[section] = _family_spec(raw[section], section, files)
    context = {EXPLICIT_MODEL_KEYS: explicit_model} if explicit_model else {}
    RunConfig.parse({"model": {}, **raw}, context={**context, FIELDS_ONLY: True})  # every field, before torch
    return RunConfig.parse(raw, context=context or None).validate()


def _family_spec(table: dict, where: str, files: FamilyFiles) -> FamilySpec:
    """``name`` (+ ``params``) of a registered family, or ``file`` (a path relative to the sweep file)."""
    FamilySpec.parse(table, where, context={TYPES_ONLY: True})  # unknown keys and types first
    if ("name" in table) == ("file" in table):
        raise ConfigError(f"{where} needs either name (a registered family) or file (a family file)")
    if "sha256" in table:
        raise ConfigError(f"{where}.sha256 is computed from the file, not given")
    spec = FamilySpec.parse(table, where)
    if spec.file is not None:
        if spec.params:
            raise ConfigError(f"{where}.params apply to a registered family, not to a file")
        return files.spec(spec.file, where)
    return spec


def _test_family_follows(raw: dict) -> dict:
    """A ``[test_family]`` without a name is the training family with its parameters changed."""
    test = raw.get("test_family")
    if not isinstance(test, dict) or "name" in test or "file" in test or not isinstance(raw.get("family"), dict):
        return raw
    family = raw["family"]
    params = {
        **_table(family.get("params", {}), "family.params"),
        **_table(test.get("params", {}), "test_family.params"),
    }
    return {**raw, "test_family": {**family, **test, "params": params}}


def _table(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def flatten(table: dict, prefix: str = "", whole_params: bool = False) -> dict:
    """``{"model": {"rank": [1]}}`` → ``{"model.rank": [1]}`` (``whole_params``: not into ``params``)."""
    out = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and not (whole_params and path.endswith(".params")):
            out.update(flatten(value, path + ".", whole_params))
        else:
            out[path] = value
    return out


def _set(raw: dict, dotted: str, value) -> None:
    """Set ``raw[a][b]… = value`` for ``dotted = "a.b…"``; unknown heads are errors."""
    parts = dotted.split(".")
    head = parts[0]
    if head not in (*SECTIONS, "seed"):
        raise ConfigError(
            f"unknown key {dotted!r} (grid and variant keys start with one of {', '.join((*SECTIONS, 'seed'))})"
        )
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {part!r} is not a table")
    node[parts[-1]] = value
