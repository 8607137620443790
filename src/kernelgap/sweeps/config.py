"""Sweep files: a base run config plus a grid, in TOML (docs/formats.md, "Sweep files").

    name = "witness"                 # optional label
    seed = 0                         # base seed (usually a grid axis)
    [family]                         # task.build_family(name, **params)
    name = "witness"
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
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import ConfigError
from ..models import ModelSpec
from ..training import FamilySpec, RunConfig, TrainConfig, default_model

#: Top-level sections and the dataclass each one fills.
SECTIONS: dict[str, type] = {"family": FamilySpec, "test_family": FamilySpec,
                             "model": ModelSpec, "train": TrainConfig}
TOP_KEYS = {"name", "seed", "grid", "variants", *SECTIONS}
#: Section defaults (``model`` starts from the calibrated training defaults).
FACTORIES: dict[type, object] = {ModelSpec: default_model}


@dataclass
class SweepConfig:
    """A parsed sweep: its label, the base config and the points to run."""

    name: str
    base: dict
    grid: dict[str, list]
    variants: list[dict]

    def runs(self) -> list[RunConfig]:
        """Every run of ``variants × grid``, in file order, duplicates removed."""
        axes = list(self.grid)
        out: dict[str, RunConfig] = {}
        for variant in self.variants:
            for values in itertools.product(*(self.grid[a] for a in axes)):
                raw = _nested_copy(self.base)
                for key, value in [*zip(axes, values), *variant.items()]:
                    _set(raw, key, value)
                run = build_run(raw)
                out.setdefault(run.run_id(), run)
        return list(out.values())


def load_sweep(path: str | Path) -> SweepConfig:
    """Read and validate a sweep file (every run is resolved once to check it)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"sweep config {p} does not exist")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc})") from None
    try:
        sweep = parse_sweep(data)
        sweep.runs()
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return sweep


def parse_sweep(data: dict) -> SweepConfig:
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
        if not values:
            raise ConfigError(f"grid.{key}: the grid axis is empty")
    variants = data.get("variants", [{}])
    if not isinstance(variants, list) or not variants:
        raise ConfigError("variants: expected a non-empty array of tables ([[variants]])")
    variants = [_flatten(_table(v, f"variants[{i}]"), "") for i, v in enumerate(variants)]
    return SweepConfig(name, base, grid, variants)


def build_run(raw: dict) -> RunConfig:
    """A :class:`RunConfig` from nested plain values, every key and type checked."""
    raw = _test_family_follows(raw)
    sections = {}
    for section, cls in SECTIONS.items():
        if section in raw:
            sections[section] = _dataclass_from(cls, raw[section], section)
    seed = _typed(raw.get("seed", 0), int, "seed")
    return RunConfig(family=sections["family"], model=sections.get("model", default_model()),
                     train=sections.get("train", TrainConfig()), seed=seed,
                     test_family=sections.get("test_family")).validate()


def _dataclass_from(cls: type, values, where: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a table")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key in values:
        if key not in known:
            raise ConfigError(f"unknown key {where}.{key!r} (expected one of {', '.join(sorted(known))})")
    kwargs = {k: _typed(v, hints[k], f"{where}.{k}") for k, v in values.items()}
    if cls is FamilySpec and "name" not in kwargs:
        raise ConfigError(f"{where}.name is required")
    return FACTORIES.get(cls, cls)(**kwargs)


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
    if not isinstance(test, dict) or "name" in test or not isinstance(raw.get("family"), dict):
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
