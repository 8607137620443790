"""Sweep files: a base run config plus a grid, in TOML (docs/formats.md, "Sweep files").

    name = "witness"                 # optional label
    seed = 0                         # base seed (usually a grid axis)
    [family]                         # task.build_family(name, **params), or
    name = "witness"                 # file = "F.json" (relative to this file; either layout)
    params = {}
    [test_family]                    # optional: scored, not trained on; without a name it is
    params = {split = "test"}        # the training family with these parameters changed
    [model]                          # models.ModelSpec fields
    [train]                          # training.TrainConfig fields
    [grid]                           # dotted keys → non-empty lists (Cartesian product)
    seed = [0, 1, 2]
    model.rank = [1, 2, 4]
    family.params.n = [4, 8]         # one family parameter as an axis
    [[variants]]                     # optional: overrides paired with every grid point
    model.feature_map = "mlp_exp"
    train.lr = 3e-3
    grid.model.rank = [8, 16]        # this variant's own axis (replaces the sweep's)

The runs are ``variants × grid`` (one variant, the base, when none is given).
A variant's value wins over a grid axis of the same key, and duplicate runs are
dropped: ``model.kind = "softmax"`` with ``model.rank = 1`` in a variant gives
one softmax run per seed however many ranks the grid lists.
Every mistake is a one-line :class:`~kernelgap.errors.ConfigError` that names
the key: unknown key, wrong type, empty grid, non-positive size.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import ConfigError, KernelgapError
from ..models import FEATURE_MAPS, ModelSpec
from ..training import FamilySpec, RunConfig, TrainConfig, default_model

#: Top-level sections and the dataclass each one fills.
SECTIONS: dict[str, type] = {"family": FamilySpec, "test_family": FamilySpec,
                             "model": ModelSpec, "train": TrainConfig}
TOP_KEYS = {"name", "seed", "grid", "variants", *SECTIONS}
#: Section defaults (``model`` starts from the calibrated training defaults).
FACTORIES: dict[type, object] = {ModelSpec: default_model}


@dataclass
class FamilyFiles:
    """Where the family files a sweep names (``file = "F.json"``) are read from.

    By default relative to the sweep file's folder; a results folder *pins* each name to its
    own content-addressed copy (``pinned``: name as written → path of the copy), so a resumed
    sweep reads exactly the bytes it began with, wherever the original went.  Each name is
    hashed once (``seen``): every run of one load names one content.
    """

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
                raise ConfigError(f"{where}.file: {written!r} is not one of the family files this "
                                  f"results folder holds ({', '.join(map(repr, self.pinned)) or 'none'})")
            self.seen[written] = FamilySpec.from_file(path, name=Path(written).stem)
        return self.seen[written]


@dataclass
class SweepConfig:
    """A parsed sweep: its label, the base config and the points to run."""

    name: str
    base: dict
    grid: dict[str, list]
    variants: list[dict]
    files: FamilyFiles = field(default_factory=FamilyFiles)

    def runs(self) -> list[RunConfig]:
        """Every run of ``variants × grid``, in file order, duplicates removed (a variant's
        own ``grid.*`` axes replace or extend the sweep's grid for that variant)."""
        out: dict[str, RunConfig] = {}
        for variant in self.variants:
            grid = {**self.grid, **{k[len("grid."):]: v for k, v in variant.items() if k.startswith("grid.")}}
            fixed = [(k, v) for k, v in variant.items() if not k.startswith("grid.")]
            axes = list(grid)
            for values in itertools.product(*(grid[a] for a in axes)):
                raw = _nested_copy(self.base)
                for key, value in [*zip(axes, values), *fixed]:
                    _set(raw, key, value)
                run = build_run(raw, self.files)
                out.setdefault(run.run_id(), run)
        return list(out.values())


def load_sweep(path: str | Path, pinned: dict[str, str] | None = None) -> SweepConfig:
    """Read and validate a sweep file (every run is resolved once to check it); family
    files it names are found relative to its folder, or in ``pinned`` (:class:`FamilyFiles`)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"sweep config {p} does not exist")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    try:
        sweep = parse_sweep(data, FamilyFiles(str(p.resolve().parent), pinned))
        sweep.runs()
    except KernelgapError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return sweep


def parse_sweep(data: dict, files: FamilyFiles | None = None) -> SweepConfig:
    """Validate the structure of a parsed TOML document."""
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(f"unknown key {key!r} (expected one of {', '.join(sorted(TOP_KEYS))})")
    if "family" not in data:
        raise ConfigError("missing section [family]")
    name = data.get("name", "sweep")
    if not isinstance(name, str):
        raise ConfigError(f"name: expected a string, got {name!r}")
    base = {k: data[k] for k in (*SECTIONS, "seed") if k in data}
    for section in SECTIONS:
        if section in base and not isinstance(base[section], dict):
            raise ConfigError(f"{section}: expected a table")
    grid = _flatten(_table(data.get("grid", {}), "grid"), "", whole_params=False)
    for key, values in grid.items():
        if not isinstance(values, list):
            raise ConfigError(f"grid.{key}: expected a list of values, got {values!r}")
        grid[key] = values = _expand_registered(key, values, f"grid.{key}")
        if not values:
            raise ConfigError(f"grid.{key}: the grid axis is empty")
    variants = data.get("variants", [{}])
    if not isinstance(variants, list) or not variants:
        raise ConfigError("variants: expected a non-empty array of tables ([[variants]])")
    variants = [_variant(_table(v, f"variants[{i}]"), f"variants[{i}]") for i, v in enumerate(variants)]
    return SweepConfig(name, base, grid, variants, files or FamilyFiles())


def _variant(table: dict, where: str) -> dict:
    """A variant's overrides, flat; its ``grid`` table (axes of its own) walked down to lists."""
    own = table.get("grid", {})
    out = _flatten({k: v for k, v in table.items() if k != "grid"}, "")
    for key, values in _flatten(_table(own, f"{where}.grid"), "", whole_params=False).items():
        if isinstance(values, list):
            values = _expand_registered(key, values, f"{where}.grid.{key}")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}.grid.{key}: expected a non-empty list of values, got {values!r}")
        out[f"grid.{key}"] = values
    return out


#: In a ``model.feature_map`` axis, ``"*"`` stands for every registered map and ``"!name"``
#: removes one (``["*", "!table"]``): a grid over the registry follows it.
EVERY_MAP, NOT_MAP = "*", "!"


def _expand_registered(key: str, values: list, where: str) -> list:
    """A ``model.feature_map`` axis with ``"*"`` / ``"!name"`` entries, in registry order."""
    if key != "model.feature_map" or not any(isinstance(v, str) and v[:1] in (EVERY_MAP, NOT_MAP) for v in values):
        return values
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


def build_run(raw: dict, files: FamilyFiles | None = None) -> RunConfig:
    """A :class:`RunConfig` from nested plain values, every key and type checked; family
    files are found through ``files`` (by default relative to the working folder)."""
    files = files or FamilyFiles()
    raw = _test_family_follows(raw)
    sections = {}
    for section, cls in SECTIONS.items():
        if section in raw:
            values = _dataclass_fields(cls, raw[section], section)
            sections[section] = _family_spec(values, section, files) if cls is FamilySpec else \
                FACTORIES.get(cls, cls)(**values)
    seed = _typed(raw.get("seed", 0), int, "seed")
    return RunConfig(family=sections["family"], model=sections.get("model", default_model()),
                     train=sections.get("train", TrainConfig()), seed=seed,
                     test_family=sections.get("test_family")).validate()


def _dataclass_fields(cls: type, values, where: str) -> dict:
    """The fields of ``cls`` from a table, every key known and every value of its type."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a table")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key in values:
        if key not in known:
            raise ConfigError(f"unknown key {where}.{key!r} (expected one of {', '.join(sorted(known))})")
    return {k: _typed(v, hints[k], f"{where}.{k}") for k, v in values.items()}


def _dataclass_from(cls: type, values, where: str):
    return FACTORIES.get(cls, cls)(**_dataclass_fields(cls, values, where))


def _family_spec(kwargs: dict, where: str, files: FamilyFiles) -> FamilySpec:
    """``name`` (+ ``params``) of a registered family, or ``file`` (a path relative to the sweep file)."""
    if ("name" in kwargs) == ("file" in kwargs):
        raise ConfigError(f"{where} needs either name (a registered family) or file (a family file)")
    if "sha256" in kwargs:
        raise ConfigError(f"{where}.sha256 is computed from the file, not given")
    if "file" in kwargs:
        if kwargs.get("params"):
            raise ConfigError(f"{where}.params apply to a registered family, not to a file")
        return files.spec(kwargs["file"], where)
    return FamilySpec(**kwargs)


def _typed(value, hint, where: str):
    """``value`` if it fits the annotation ``hint`` (ints accepted for floats)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else (hint,)
    for typ in options:
        if typ is type(None) and value is None:
            return None
        if dataclasses.is_dataclass(typ) and isinstance(value, dict):
            return _dataclass_from(typ, value, where)
        if typ is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if typ is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if typ in (str, bool, dict) and isinstance(value, typ):
            return value
    names = " or ".join(getattr(t, "__name__", str(t)) for t in options)
    raise ConfigError(f"{where}: expected {names}, got {value!r}")


def _test_family_follows(raw: dict) -> dict:
    """A ``[test_family]`` without a name is the training family with its parameters changed."""
    test = raw.get("test_family")
    if not isinstance(test, dict) or "name" in test or "file" in test or not isinstance(raw.get("family"), dict):
        return raw
    family = raw["family"]
    params = {**_table(family.get("params", {}), "family.params"),
              **_table(test.get("params", {}), "test_family.params")}
    return {**raw, "test_family": {**family, **test, "params": params}}


def _table(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def _flatten(table: dict, prefix: str, whole_params: bool = True) -> dict:
    """``{"model": {"rank": [1]}}`` → ``{"model.rank": [1]}``.  In variants a ``params``
    table given whole stays whole; in the grid every table is walked down to its lists."""
    out = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and not (whole_params and path.endswith(".params")):
            out.update(_flatten(value, path + ".", whole_params))
        else:
            out[path] = value
    return out


def _set(raw: dict, dotted: str, value) -> None:
    """Set ``raw[a][b]… = value`` for ``dotted = "a.b…"``; unknown heads are errors."""
    parts = dotted.split(".")
    head = parts[0]
    if head not in (*SECTIONS, "seed"):
        raise ConfigError(f"unknown key {dotted!r} (grid and variant keys start with one of "
                          f"{', '.join((*SECTIONS, 'seed'))})")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: {part!r} is not a table")
    node[parts[-1]] = value


def _nested_copy(d):
    return {k: _nested_copy(v) for k, v in d.items()} if isinstance(d, dict) else d
