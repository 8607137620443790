"""What one training run is: a family, a model, a schedule and a seed.

Every config checks its fields when it is made (a one-line ConfigError naming the field);
``validate()`` adds what depends on the machine and the family.  :meth:`RunConfig.resolved`
fills every default that depends on other fields, so the resolved config is the full
description of a run and its hash is the run id.  Runs that differ only in seed (and, for
maskable maps, rank) share a :meth:`RunConfig.stack_key` and train as one stack.  The
calibrated defaults: docs/experiments.md ("Training recipe").
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ..args import key_values
from ..errors import ConfigError, FamilyError, KernelgapError
from ..io import config_hash, read_input
from ..limits import MAX_RESTARTS, MAX_STEPS
from ..models.specs import (  # noqa: F401 (FALLBACK_LR, SOFTMAX_LR: names of kernelgap.training)
    FALLBACK_LR,
    FIELDS_ONLY,
    SOFTMAX_LR,
    SPECS,
    KernelSpec,
    ModelSpec,
    check_kind,
    every_field,
    model_identity,
    model_spec,
)
from ..run_values import Device, LearningRate, Power, PruneFrom, Seed, StopBelow
from ..task import AnyFamily, Family, as_sequences, build_family, family_parameters, parse_family_bytes
from ..validation import Config, between, invalid, one_of

#: Floating-point types a run may train in, by name.
DTYPE_NAMES = ("float32", "float64")


def __getattr__(name: str):
    if name == "DTYPES":  # the torch types by name, imported when asked for (not with the config)
        import torch

        return {n: getattr(torch, n) for n in DTYPE_NAMES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: A model spec from its fields; every spec's defaults are the calibrated training recipe.
default_model = model_spec
Steps = between(0, MAX_STEPS)


class TrainConfig(Config):
    """Full-batch Adam in two phases, each with its own cosine decay to zero: ``mse_steps`` of
    mean squared error, then ``max_steps`` of the power mean ``(mean |e|^power)^(1/power)``, a
    smooth stand-in for the max error (exactness needs max error < 1/2, not low MSE).  A member
    stops once its max error is below ``stop_below`` (``None`` or ``0``: never)."""

    WHERE: ClassVar[str] = "train"

    lr: LearningRate | None = Field(None, description="Adam learning rate (default: calibrated per model)")
    mse_steps: Steps = Field(1000, description="steps of the MSE phase (default: the map's schedule, else 1000)")
    max_steps: Steps = Field(
        2000, description="steps of the power-mean (max-error) phase (default: the map's schedule, sized, else 2000)"
    )
    power: Power = Field(8.0, description="power of the power-mean loss (default: 8, more for a large product family)")
    stop_below: StopBelow | None = Field(0.5, description="stop a member once its max error is below it (0: never)")
    restarts: between(0, MAX_RESTARTS) = Field(
        0, description="fresh starts of a run that ends not exact, up to this many; its best try is kept"
    )
    distill: bool = Field(False, description="start from a table of the same rank trained first (kernel models)")
    prune_from: PruneFrom = Field(
        1.0,
        description="train a table at this many times the rank first and keep its most-used features; 1: off "
        "(default: the map's recipe, 1.5 for a table at N > 3 with at most one feature per query, else 1)",
    )
    dtype: one_of(DTYPE_NAMES) = "float32"
    device: Device = Field(
        "cpu", description="a torch device (cpu, cuda, cuda:1, mps); results are recorded per device"
    )

    def model_post_init(self, context: Any, /) -> None:
        if self.stop_below == 0:  # "never stop early" has one spelling, so one run id
            self.stop_below = None

    def validate(self, where: str = "train") -> TrainConfig:
        """That the device exists here."""
        from ..models.devices import resolve_device

        try:
            resolve_device(self.device)
        except KernelgapError as exc:
            raise ConfigError(f"{where}.device: {exc}") from None
        return self


#: Validation context key: check a family's keys and types, not its registered name and
#: parameters (a sweep file's section, before its own structure is checked).
TYPES_ONLY = "types_only"


class FamilySpec(Config):
    """A registered family and its builder's parameters, or a family file (either layout).

    A file is identified by its content: ``sha256`` (and ``name``, the file's stem) enter the
    run id, ``file`` does not, so a run is the same run wherever the file lies; bytes whose
    hash is not ``sha256`` are refused, so a record never names content other than what was
    trained on.  :meth:`validate` checks the parameters' values (or loads the file).
    """

    WHERE: ClassVar[str] = "family"

    name: str = Field("", description="a registered family (or a file's stem)")
    params: dict[str, Any] = Field(default_factory=dict, description="the family builder's parameters")
    file: str | None = Field(None, description="a family file, relative to the sweep file")
    sha256: str | None = Field(None, description="the file's SHA-256 (computed from the file)")

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> FamilySpec:
        """The spec of the file's present content (``name`` defaults to the file's stem)."""
        p = Path(path).resolve()
        return cls(name=name or p.stem, file=str(p), sha256=file_sha256(p))

    @classmethod
    def named_or_file(cls, family: str, params: list[str]) -> FamilySpec:
        """A command line's ``--family`` and ``-p key=value``s, or a family file."""
        from ..task.registry import check_family_argument

        values = check_family_argument(family, key_values(params), load=False)
        return cls.from_file(family) if values is None else cls.parse({"name": family, "params": values})

    @model_validator(mode="after")
    def _registered(self, info: ValidationInfo) -> FamilySpec:
        if self.file is not None or (info.context or {}).get(TYPES_ONLY):
            return self
        try:
            allowed = family_parameters(self.name)
        except KernelgapError as exc:
            raise invalid(str(exc), path="name") from None
        for key, value in self.params.items():
            if key not in allowed:
                raise invalid(f"unknown key {key!r} (family {self.name!r} takes {', '.join(allowed)})", path="params")
            if not isinstance(value, (int, float, str, bool, list)):
                raise invalid(f"unsupported value {value!r}", path=f"params.{key}")
        return self

    def validate(self, where: str = "family") -> FamilySpec:
        """The parameters' types, ranges and sizes (before any build), or the file loaded."""
        if self.file is not None:
            self.load()  # a one-line FamilyError naming the problem
            return self
        from ..task.registry import check_params

        try:
            check_params(self.name, self.params)
        except KernelgapError as exc:
            raise ConfigError(f"{where}.params: {exc}") from None
        return self

    def build(self) -> Family:
        """The family as sequences (a product family expanded, within MAX_EXPANDED)."""
        return as_sequences(self.load())

    def load(self) -> AnyFamily:
        """The family as built or stored (a product family stays a product)."""
        if self.file is None:
            return build_family(self.name, **self.params)
        raw = read_file_bytes(self.file)
        digest = hashlib.sha256(raw).hexdigest()
        if self.sha256 is not None and digest != self.sha256:
            raise FamilyError(
                f"family file {self.file} changed since the run was configured: "
                f"sha256 {self.sha256[:12]}… → {digest[:12]}…; use a new --out"
            )
        return parse_family_bytes(raw, self.file)


def read_file_bytes(path: str | Path) -> bytes:
    return read_input(path, "family file", FamilyError)


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(read_file_bytes(path)).hexdigest()


def run_identity(config: dict) -> dict:
    """What a run id hashes: the resolved config less what does not make the run — where a
    family file lies, the model fields its kind does not use, and ``restarts``, ``distill``
    and ``prune_from`` when off (a run without them keeps the id it had before they existed)."""
    out = dict(config)
    if isinstance(out.get("train"), dict):
        unset = {"restarts": 0, "distill": False, "prune_from": 1.0}
        out["train"] = {k: v for k, v in out["train"].items() if k not in unset or v != unset[k]}
    if isinstance(out.get("model"), dict):
        out["model"] = model_identity(out["model"])
    for section in ("family", "test_family"):
        spec = out.get(section)
        if isinstance(spec, dict) and spec.get("sha256") is not None:
            out[section] = {k: v for k, v in spec.items() if k != "file"}
    return out


#: Validation context key: the model fields a sweep file sets (those its kind does not use
#: must keep their defaults).
EXPLICIT_MODEL_KEYS = "explicit_model_keys"


@functools.cache
def unused_values() -> dict:
    """Every model field at the value a run whose kind does not use it may give it: its
    default, but the map and score scaling at the values the probe's sweep tables have
    always written (the text of those tables names its folders)."""
    fields = {name: None if f.is_required() else f.get_default() for name, f in every_field().items()}
    return {**fields, "feature_map": "mlp_exp", "scaled_scores": False}


def record_model(spec: ModelSpec) -> dict:
    """A model as a record writes it: every model field of every kind (one layout for every
    record), those its kind does not use null."""
    return {**dict.fromkeys(every_field()), **spec.model_dump()}


def sweep_table_model(spec: ModelSpec) -> dict:
    """A model as the probe writes it into a sweep file's table: its fields over
    :func:`unused_values` (the layout whose hash names the probe's folders)."""
    return {**unused_values(), **spec.model_dump()}


def model_table(table: dict, explicit=()) -> dict:
    """A run's ``model`` table ready for its kind's spec: the fields other kinds use dropped,
    unless set in ``explicit`` to a value other than :func:`unused_values` gives it (a field
    that changes nothing, set, is a mistake)."""
    kind = check_kind(table.get("kind", "kernel"))
    own = SPECS[kind].model_fields
    if ("module" in own) != (table.get("module") is not None):
        raise invalid("is given exactly when kind = 'module'", path="module")
    defaults = unused_values()
    kept = {"kind": kind}
    for key, value in table.items():
        if key in own or key not in defaults:
            kept[key] = value  # its own field, or an unknown key its spec refuses by name
        elif key in explicit and value != defaults[key]:
            raise invalid(
                f"does not apply to kind = {kind!r}, got {value!r} "
                f"(a {kind} model is built from {', '.join(list(own)[1:])})",
                path=key,
            )
    return kept


class RunConfig(Config):
    """One run: train ``model`` from ``seed`` on ``family``; score ``test_family`` too."""

    family: FamilySpec
    model: ModelSpec = Field(default_factory=KernelSpec)
    train: TrainConfig = Field(default_factory=TrainConfig)
    seed: Seed = Field(0, description="initialisation seed, 0..2^64 − 1")
    test_family: FamilySpec | None = None
    _recipe_steps: bool = PrivateAttr(False)
    _sized: bool = PrivateAttr(False)
    _recipe: dict | None = PrivateAttr(None)

    @field_validator("model", mode="wrap")
    @classmethod
    def _kind_fields(cls, value, handler, info: ValidationInfo):
        if not isinstance(value, dict):
            return handler(value)
        return handler(model_table(value, (info.context or {}).get(EXPLICIT_MODEL_KEYS) or ()))

    @model_validator(mode="after")
    def _recipe_schedule(self, info: ValidationInfo) -> RunConfig:
        """A kernel map's calibrated schedule for a run that sets neither phase's steps; a
        distilled run the power mean alone, with its teacher's readout where it gives none."""
        if self.train.restarts and not self.model.restartable:
            raise invalid(
                "a module trains once (fresh starts are for kernel and softmax models)", path="train.restarts"
            )
        if (info.context or {}).get(FIELDS_ONLY):
            return self  # a kernel spec's map, which the rest asks, is not resolved
        if self.train.distill and not self.model.distillable:
            raise invalid(
                "is for a kernel model whose map is not 'table' (its teacher is a table)", path="train.distill"
            )
        if self.train.prune_from > 1 and not self.model.prunable:
            raise invalid("is for a kernel model with the 'table' map (its columns are cut)", path="train.prune_from")
        if self.train.distill:
            from .distill import student_model

            self.model = student_model(self.model)
        if not {"mse_steps", "max_steps"} & self.train.model_fields_set:
            schedule = self.model.recipe_schedule
            if self.train.distill:  # the student starts near its teacher: the power mean alone
                schedule = {"mse_steps": 0, "max_steps": schedule.get("max_steps", self.train.max_steps)}
            if schedule:
                self.train = self.train.model_copy(update=schedule)
                self._recipe_steps = True
        return self

    def validate(self) -> RunConfig:
        """What depends on the machine and the family: family files and parameters, devices,
        rank and memory limits."""
        self.family.validate("family")
        if self.test_family is not None:
            self.test_family.validate("test_family")
        from ..models.build import check_model
        from .distill import check_distillable

        try:
            check_model(self.model, "model")
            check_distillable(self)
        except KernelgapError as exc:
            raise ConfigError(str(exc)) from None
        self.train.validate("train")
        return self

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """The run of :meth:`as_dict`'s output."""
        return cls.parse(d)

    @property
    def recipe_steps(self) -> bool:
        """Whether its schedule is its map's calibrated one (:meth:`sized` may lengthen it)."""
        return self._recipe_steps

    @property
    def recipe(self) -> dict | None:
        """What :meth:`sized` found (:func:`~kernelgap.training.recipe.sized_fields`), or None."""
        return self._recipe

    def sized(self) -> RunConfig:
        """The same run with the fields it left unset sized by its family (idempotent)."""
        from .recipe import sized_run

        return self if self._sized else sized_run(self)

    def resolved(self) -> RunConfig:
        """The same run sized by its family, with the calibrated learning rate."""
        run = self.sized()
        if run.train.lr is not None:
            return run
        return run.model_copy(update={"train": run.train.model_copy(update={"lr": run.model.default_lr})})

    def as_dict(self) -> dict:
        """The resolved run as plain values, its model in the record layout (:func:`record_model`)."""
        run = self.resolved()
        return {**run.model_dump(), "model": record_model(run.model)}

    def identity(self) -> dict:
        """What its run id hashes (:func:`run_identity`)."""
        run = self.resolved()
        return run_identity({**run.model_dump(), "model": run.model.identity()})

    def run_id(self) -> str:
        """16 hex digits of the ``sha256`` of the canonical JSON of :meth:`identity`."""
        return config_hash(self.identity())

    def stack_key(self) -> str:
        """Runs with equal keys train in one stack (a module trains alone)."""
        if self.model.built_elsewhere:
            return self.run_id()
        d = self.identity()
        d.pop("seed")
        if self.model.maskable:
            d["model"] = {k: v for k, v in d["model"].items() if k != "rank"}
        return config_hash(d)
