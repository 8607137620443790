"""What one training run is: a family, a model, a schedule and a seed.

Every config is a pydantic model (:class:`kernelgap.validation.Config`) that checks its
fields when it is made — a one-line :class:`~kernelgap.errors.ConfigError` naming the
field — and :meth:`RunConfig.parse` is how the CLI and the sweep loader both make a run;
``validate()`` adds what depends on the machine and the family (devices, family files and
parameter ranges, memory and rank limits).  The calibrated model defaults are the specs'
own (:mod:`kernelgap.models.specs`; a kernel map's readout and schedule are its own facts,
applied when the spec and the run are made); :meth:`RunConfig.resolved` fills every default
that depends on other fields (sized by the family, the learning rate by model), so the
resolved config is the full description of a run and its hash is the run id.  Runs that
differ only in seed — and, for maskable feature maps, in rank — share a
:meth:`RunConfig.stack_key` and train as one stacked program.

The calibrated defaults are documented, with the commands that measured them, in
docs/experiments.md ("Training recipe").
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ..args import key_values
from ..errors import ConfigError, FamilyError, KernelgapError
from ..io import read_input
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

#: Floating-point types a run may train in, by name (:func:`torch_dtype`: the torch type).
DTYPE_NAMES = ("float32", "float64")


def torch_dtype(name: str):
    """The torch type of a :data:`DTYPE_NAMES` name (torch is imported here, not with the config)."""
    import torch

    return {"float32": torch.float32, "float64": torch.float64}[name]


def __getattr__(name: str):
    if name == "DTYPES":  # the torch types by name, imported when asked for
        return {n: torch_dtype(n) for n in DTYPE_NAMES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: A model spec from its fields (:func:`~kernelgap.models.specs.model_spec`): every spec's
#: defaults are the calibrated training recipe.
default_model = model_spec


DType = one_of(DTYPE_NAMES)


#: Steps of a phase: 0 (skip it) up to :data:`kernelgap.limits.MAX_STEPS`.
Steps = between(0, MAX_STEPS)
#: Fresh starts of a run that ends not exact: 0 up to :data:`kernelgap.limits.MAX_RESTARTS`.
Restarts = between(0, MAX_RESTARTS)


class TrainConfig(Config):
    """Full-batch Adam in two phases, each with its own cosine decay to zero.

    Phase 1: ``mse_steps`` of mean squared error.  Phase 2: ``max_steps`` of
    the power mean ``(mean |e|^power)^(1/power)``, a smooth stand-in for the
    max error (exactness needs max error < 1/2, not low MSE).  A member stops
    as soon as its train max error is below ``stop_below`` (``None`` or ``0``:
    never; the default 0.5 is "exact").  A run with ``restarts = K`` that ends not exact
    trains again from a fresh initialisation, up to K times, and keeps its best try
    (:mod:`.restarts`); one with ``distill`` starts from a table trained first (:mod:`.distill`), one
    with ``prune_from`` from a wider table cut to its rank (:mod:`.prune`).
    A run that sets neither phase's steps trains on its feature map's calibrated schedule
    (``RunConfig._recipe_schedule``; ``table``: the power mean alone, docs/experiments.md).
    """

    WHERE: ClassVar[str] = "train"

    lr: LearningRate | None = Field(None, description="Adam learning rate (default: calibrated per model)")
    mse_steps: Steps = Field(1000, description="steps of the MSE phase (default: the map's schedule, else 1000)")
    max_steps: Steps = Field(
        2000, description="steps of the power-mean (max-error) phase (default: the map's schedule, sized, else 2000)"
    )
    power: Power = Field(8.0, description="power of the power-mean loss (default: 8, more for a large product family)")
    stop_below: StopBelow | None = Field(0.5, description="stop a member once its max error is below it (0: never)")
    restarts: Restarts = Field(
        0, description="fresh starts of a run that ends not exact, up to this many; its best try is kept"
    )
    distill: bool = Field(False, description="start from a table of the same rank trained first (kernel models)")
    prune_from: PruneFrom = Field(
        1.0, description="train a table at this many times the rank first and keep its most-used features; 1: off"
    )
    dtype: DType = "float32"
    #: A torch device ("cuda", "cuda:1"); results are recorded per device.
    device: Device = Field(
        "cpu", description="a torch device (cpu, cuda, cuda:1, mps); results are recorded per device"
    )

    def model_post_init(self, context: Any, /) -> None:
        if self.stop_below == 0:  # "never stop early" has one spelling, so one run id
            self.stop_below = None

    def validate(self, where: str = "train") -> TrainConfig:
        """That the device exists here (its name was checked when it was made:
        :data:`~kernelgap.run_values.Device`)."""
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
    """A registered family and its builder's parameters (``task.build_family``), or a family
    file (either layout).  A product family stays a product (:meth:`load`): training expands
    it only where it is small and of length 3 or the model is not covered by the two-candidate
    form, and otherwise trains on the product itself, scored on the whole family
    (:func:`kernelgap.training.product.training_family`; docs/theory.md, "Training on product
    families").  :meth:`build` is the family as sequences, for what works per sequence.

    A file is identified by its content: ``sha256`` (and ``name``, the file's stem) enter the
    run id, ``file`` — where the bytes are read from — does not, so a sweep can train from
    its own copy of the file (docs/formats.md, "Results folders") and a run is the same run
    wherever the file lies.  :meth:`build` reads the file once and refuses bytes whose hash
    is not ``sha256``: a record can never name content other than what was trained on.

    A registered family's name and parameter names are checked when the spec is made;
    :meth:`validate` checks the parameters' values (or loads the file).
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
        """A command line's ``--family``: a registered family by name with its ``-p key=value``
        parameters, or a family file (a path that exists or ends in .json)."""
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
        """The parameters' types, ranges and sizes (``task.registry.check_params``, before any
        build), or the file loaded: one line naming the problem."""
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
        """The family as sequences (a product family expanded; refused above
        :data:`~kernelgap.task.family.MAX_EXPANDED` sequences)."""
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
    """The bytes of a family file; a missing or unreadable file is a one-line error."""
    return read_input(path, "family file", FamilyError)


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(read_file_bytes(path)).hexdigest()


def run_identity(config: dict) -> dict:
    """What a run id hashes: the resolved config less what does not make the run — where
    family files are read from (a file is named by its ``sha256``; see :class:`FamilySpec`),
    the model fields its kind does not use (:func:`~kernelgap.models.specs.model_identity`:
    a softmax run has no feature map or rank), ``train.restarts`` at 0, ``train.distill``
    off and ``train.prune_from`` at 1 (a run without them keeps the id it had before they existed)."""
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


#: Key of the validation context that lists the model fields a sweep file sets for a run
#: (besides its grid axes): those its kind does not use must keep their defaults.
EXPLICIT_MODEL_KEYS = "explicit_model_keys"


@functools.cache
def unused_values() -> dict:
    """Every model field of every kind at the value a run whose kind does not use it may give
    it explicitly (it changes nothing; another value is a mistake): its default (the first
    kind's that has it), but a kernel's map and a softmax model's score scaling at the values
    the probe's sweep tables have always written (the text of those tables names its folders)."""
    fields = {name: None if f.is_required() else f.get_default() for name, f in every_field().items()}
    return {**fields, "feature_map": "mlp_exp", "scaled_scores": False}


def record_model(spec: ModelSpec) -> dict:
    """A model as a record and a checkpoint write it: every model field of every kind, so
    records of every kind have one layout (report rows, the columns of ``results.csv``),
    its spec's fields with their values and the fields its kind does not use null (a
    softmax run has no rank, a module no heads); :func:`run_identity` keeps only its kind's
    fields."""
    return {**dict.fromkeys(every_field()), **spec.model_dump()}


def sweep_table_model(spec: ModelSpec) -> dict:
    """A model as the probe writes it into a sweep file's ``model`` table: its spec's fields
    over :func:`unused_values` (the other kinds' fields at the values they may be given;
    the layout whose hash names the probe's baseline and recipe folders, kept so those
    folders are found again)."""
    return {**unused_values(), **spec.model_dump()}


def model_table(table: dict, explicit=()) -> dict:
    """A run's ``model`` table ready for its kind's spec: the fields other kinds use dropped —
    the base table of a sweep, its grid and a record span kinds — unless set explicitly
    (``explicit``: :data:`EXPLICIT_MODEL_KEYS`) to a value other than :func:`unused_values`
    gives it: a field that changes nothing, set, is a mistake.  ``module`` is given exactly for
    a module."""
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
    """One run: train ``model`` from ``seed`` on ``family``; score ``test_family`` too.

    A ``model`` given as a table holds its kind's fields (:func:`model_table`); its spec's
    defaults are the calibrated training recipe, its feature map's schedule included
    (:meth:`_recipe_schedule`)."""

    family: FamilySpec
    model: ModelSpec = Field(default_factory=KernelSpec)
    train: TrainConfig = Field(default_factory=TrainConfig)
    seed: Seed = Field(0, description="initialisation seed, 0..2^64 − 1")
    test_family: FamilySpec | None = None
    #: ``train`` is the map's own schedule (:meth:`sized` may lengthen it); sized; what sizing found.
    _recipe_steps: bool = PrivateAttr(False)
    _sized: bool = PrivateAttr(False)
    _recipe: dict | None = PrivateAttr(None)

    @field_validator("model", mode="wrap")
    @classmethod
    def _kind_fields(cls, value, handler, info: ValidationInfo):
        """A table holds its kind's fields (:func:`model_table`)."""
        if not isinstance(value, dict):
            return handler(value)
        return handler(model_table(value, (info.context or {}).get(EXPLICIT_MODEL_KEYS) or ()))

    @model_validator(mode="after")
    def _recipe_schedule(self, info: ValidationInfo) -> RunConfig:
        """A kernel map's calibrated schedule (:attr:`~kernelgap.models.feature_maps.FeatureMap.recipe_schedule`)
        for a run that sets neither ``mse_steps`` nor ``max_steps``; one that sets either keeps
        :class:`TrainConfig`'s defaults for the other; a distilled run the power mean alone,
        with its teacher's readout where it gives none (:func:`.distill.student_model`)."""
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
        """What depends on the machine and the family, before any training (its fields were
        checked when it was made): family files and parameters, devices, rank and memory limits."""
        self.family.validate("family")
        if self.test_family is not None:
            self.test_family.validate("test_family")
        from ..models.sizing import check_model
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
        """The run of :meth:`as_dict`'s output (a record's ``config``, a checkpoint's runs)."""
        return cls.parse(d)

    @property
    def recipe_steps(self) -> bool:
        """Whether its schedule is its map's calibrated one, which :meth:`sized` may lengthen."""
        return self._recipe_steps

    @property
    def recipe(self) -> dict | None:
        """What :meth:`sized` found (:func:`~kernelgap.training.recipe.sized_fields`), or None."""
        return self._recipe

    def sized(self) -> RunConfig:
        """The same run with the fields it left unset sized by its family (value width,
        temperature, steps: :func:`~kernelgap.training.recipe.sized_fields`); idempotent.  A
        run read back from a record has every field set and is its own sizing."""
        from .recipe import sized_run

        return self if self._sized else sized_run(self)

    def resolved(self) -> RunConfig:
        """The same run with every derived default filled in: sized by its family
        (:meth:`sized`), then the calibrated learning rate."""
        run = self.sized()
        if run.train.lr is not None:
            return run
        return run.model_copy(update={"train": run.train.model_copy(update={"lr": run.model.default_lr})})

    def as_dict(self) -> dict:
        """The resolved run as plain values, its model in the record layout (:func:`record_model`)."""
        run = self.resolved()
        out = run.model_dump()
        out["model"] = record_model(run.model)
        return out

    def identity(self) -> dict:
        """What its run id hashes (:func:`run_identity`)."""
        run = self.resolved()
        out = run.model_dump()
        out["model"] = run.model.identity()
        return run_identity(out)

    def run_id(self) -> str:
        """``sha256`` of the canonical JSON of the resolved config's :func:`run_identity`,
        16 hex digits."""
        return config_hash(self.identity())

    def stack_key(self) -> str:
        """Runs with equal keys can train in one stack (seed and maskable rank vary;
        a module trains alone)."""
        if self.model.built_elsewhere:
            return self.run_id()
        d = self.identity()
        d.pop("seed")
        if self.model.maskable:
            d["model"] = {k: v for k, v in d["model"].items() if k != "rank"}
        return config_hash(d)


def config_hash(obj) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
