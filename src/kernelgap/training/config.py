"""What one training run is: a family, a model, a schedule and a seed.

Everything is a plain dataclass that validates itself (``validate()`` raises a
one-line :class:`~kernelgap.errors.ConfigError` naming the field); the CLI and
the sweep loader both call it.  :meth:`RunConfig.resolved` fills every default
that depends on other fields (the learning rate by model), so the resolved
config is the full description of a run and its hash is the run id.  Runs that
differ only in seed — and, for maskable feature maps, in rank — share a
:meth:`RunConfig.stack_key` and train as one stacked program.

The calibrated defaults below are documented, with the commands that measured
them, in docs/experiments.md ("Training recipe").
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from ..errors import ConfigError, FamilyError, KernelgapError
from ..models import ModelSpec, feature_map_class, resolve_device
from ..models.attention import model_identity
from ..models.external import ModuleSpec
from ..models.feature_maps import FeatureMap
from ..task import AnyFamily, Family, as_sequences, build_family, family_parameters, parse_family_bytes

#: Learning rate of dense softmax (a kernel map's is its own ``default_lr``).
SOFTMAX_LR = 5e-3
#: Learning rate of a module written elsewhere: that of a generic feature map.
FALLBACK_LR = FeatureMap.default_lr
#: Initial scale of the models' parameters (at 1.0 the kernels start nearly flat and
#: training stalls; docs/experiments.md, "Training recipe").
INIT_SCALE = 2.0
#: Dense softmax scores ``<q(x), k(z)> / (τ·√d)`` with this τ (``scaled_scores``): attention
#: starts near uniform and the scorer trains slower than the readout, which it needs to
#: find the good candidates (docs/experiments.md, "Training recipe", has the measurements).
SOFTMAX_TEMPERATURE = 4.0
#: Floating-point types a run may train in.
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def default_model(**fields) -> ModelSpec:
    """A :class:`ModelSpec` with the calibrated training defaults.

    ``kind='softmax'`` also gets scaled scores with temperature
    :data:`SOFTMAX_TEMPERATURE` (explicit fields override).
    """
    defaults = {"init_scale": INIT_SCALE}
    if fields.get("kind") == "softmax":
        defaults.update(temperature=SOFTMAX_TEMPERATURE, scaled_scores=True)
    return ModelSpec(**{**defaults, **fields})


def default_lr(model: ModelSpec) -> float:
    """The calibrated learning rate for a model: softmax's, its feature map's, or a
    module's (docs/experiments.md, "Training recipe")."""
    if model.kind == "softmax":
        return SOFTMAX_LR
    if model.kind == "kernel":
        return feature_map_class(model.feature_map).default_lr
    return FALLBACK_LR


@dataclass
class TrainConfig:
    """Full-batch Adam in two phases, each with its own cosine decay to zero.

    Phase 1: ``mse_steps`` of mean squared error.  Phase 2: ``max_steps`` of
    the power mean ``(mean |e|^power)^(1/power)``, a smooth stand-in for the
    max error (exactness needs max error < 1/2, not low MSE).  A member stops
    as soon as its train max error is below ``stop_below`` (``None`` or ``0``:
    never; the default 0.5 is "exact").
    """

    lr: float | None = None  # None: default_lr(model)
    mse_steps: int = 1000
    max_steps: int = 2000
    power: float = 8.0
    stop_below: float | None = 0.5
    dtype: str = "float32"
    device: str = "cpu"  # a torch device ("cuda", "cuda:1"); results are recorded per device

    def __post_init__(self) -> None:
        if self.stop_below == 0:  # "never stop early" has one spelling, so one run id
            self.stop_below = None

    def validate(self, where: str = "train") -> "TrainConfig":
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"{where}.lr must be a finite number > 0, got {self.lr}")
        for key in ("mse_steps", "max_steps"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{where}.{key} must be ≥ 0, got {getattr(self, key)}")
        if not (math.isfinite(self.power) and self.power >= 1):
            raise ConfigError(f"{where}.power must be a finite number ≥ 1, got {self.power}")
        if self.stop_below is not None and not self.stop_below >= 0:
            raise ConfigError(f"{where}.stop_below must be ≥ 0 (0: never stop early), got {self.stop_below}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"{where}.dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        try:
            resolve_device(self.device)
        except KernelgapError as exc:
            raise ConfigError(f"{where}.device: {exc}") from None
        return self


@dataclass
class FamilySpec:
    """A registered family and its builder's parameters (``task.build_family``), or a family
    file (either layout; a product family is expanded for training).

    A file is identified by its content: ``sha256`` (and ``name``, the file's stem) enter the
    run id, ``file`` — where the bytes are read from — does not, so a sweep can train from
    its own copy of the file (docs/formats.md, "Results folders") and a run is the same run
    wherever the file lies.  :meth:`build` reads the file once and refuses bytes whose hash
    is not ``sha256``: a record can never name content other than what was trained on.
    """

    name: str = ""
    params: dict = field(default_factory=dict)
    file: str | None = None
    sha256: str | None = None

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> "FamilySpec":
        """The spec of the file's present content (``name`` defaults to the file's stem)."""
        p = Path(path).resolve()
        return cls(name=name or p.stem, file=str(p), sha256=file_sha256(p))

    def validate(self, where: str = "family") -> "FamilySpec":
        if self.file is not None:
            self.load()  # a one-line FamilyError naming the problem
            return self
        try:
            allowed = family_parameters(self.name)
        except KernelgapError as exc:
            raise ConfigError(f"{where}.name: {exc}") from None
        for key, value in self.params.items():
            if key not in allowed:
                raise ConfigError(f"unknown key {where}.params.{key!r} (family {self.name!r} takes "
                                  f"{', '.join(allowed)})")
            if not isinstance(value, (int, float, str, bool, list)):
                raise ConfigError(f"{where}.params.{key}: unsupported value {value!r}")
        from ..task.registry import check_params  # types, ranges and sizes, before any build

        try:
            check_params(self.name, self.params)
        except KernelgapError as exc:
            raise ConfigError(f"{where}.params: {exc}") from None
        return self

    def build(self) -> Family:
        """The family as sequences (a product family expanded)."""
        return as_sequences(self.load())

    def load(self) -> AnyFamily:
        """The family as built or stored (a product family stays a product)."""
        if self.file is None:
            return build_family(self.name, **self.params)
        raw = read_file_bytes(self.file)
        digest = hashlib.sha256(raw).hexdigest()
        if self.sha256 is not None and digest != self.sha256:
            raise FamilyError(f"family file {self.file} changed since the run was configured: "
                              f"sha256 {self.sha256[:12]}… → {digest[:12]}…; use a new --out")
        return parse_family_bytes(raw, self.file)


def read_file_bytes(path: str | Path) -> bytes:
    """The bytes of a family file; a missing or unreadable file is a one-line error."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise FamilyError(f"family file {path} cannot be read: {exc.strerror or exc}") from None


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(read_file_bytes(path)).hexdigest()


def run_identity(config: dict) -> dict:
    """What a run id hashes: the resolved config less what does not make the run — where
    family files are read from (a file is named by its ``sha256``; see :class:`FamilySpec`)
    and the model fields its kind does not use (:func:`~kernelgap.models.attention.model_identity`:
    a softmax run has no feature map or rank)."""
    out = dict(config)
    if isinstance(out.get("model"), dict):
        out["model"] = model_identity(out["model"])
    for section in ("family", "test_family"):
        spec = out.get(section)
        if isinstance(spec, dict) and spec.get("sha256") is not None:
            out[section] = {k: v for k, v in spec.items() if k != "file"}
    return out


@dataclass
class RunConfig:
    """One run: train ``model`` from ``seed`` on ``family``; score ``test_family`` too."""

    family: FamilySpec
    model: ModelSpec = field(default_factory=default_model)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    test_family: FamilySpec | None = None

    def validate(self) -> "RunConfig":
        """Every section's choices and ranges, before any training."""
        self.family.validate("family")
        if self.test_family is not None:
            self.test_family.validate("test_family")
        try:
            self.model.validate("model")
        except KernelgapError as exc:
            raise ConfigError(str(exc)) from None
        self.train.validate("train")
        return self

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """The run of :meth:`as_dict`'s output (a record's ``config``, a checkpoint's runs)."""
        model = dict(d["model"])
        if model.get("module") is not None:
            model["module"] = ModuleSpec(**model["module"])
        test = d.get("test_family")
        return cls(family=FamilySpec(**d["family"]), model=ModelSpec(**model), train=TrainConfig(**d["train"]),
                   seed=d["seed"], test_family=FamilySpec(**test) if test is not None else None)

    def resolved(self) -> "RunConfig":
        """The same run with every derived default filled in."""
        if self.train.lr is not None:
            return self
        return replace(self, train=replace(self.train, lr=default_lr(self.model)))

    def as_dict(self) -> dict:
        return asdict(self.resolved())

    def run_id(self) -> str:
        """``sha256`` of the canonical JSON of the resolved config's :func:`run_identity`,
        16 hex digits."""
        return config_hash(run_identity(self.as_dict()))

    def stack_key(self) -> str:
        """Runs with equal keys can train in one stack (seed and maskable rank vary;
        a module trains alone)."""
        if self.model.kind == "module":
            return self.run_id()
        d = run_identity(self.as_dict())
        d.pop("seed")
        if self.model.kind == "kernel" and feature_map_class(self.model.feature_map).maskable:
            d["model"] = {k: v for k, v in d["model"].items() if k != "rank"}
        return config_hash(d)


def config_hash(obj) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
