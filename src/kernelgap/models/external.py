"""Attention modules written elsewhere, as models the stacked trainer can train.

A module is named by a *target*, ``package.module:Class`` or
``path/to/file.py:Class``, and follows one of two interfaces:

* ``"sequence"`` — ``Class(m, rank, **kwargs)``, ``forward(tokens [B, N, m]) → [B, N]``;
* ``"layer"`` — ``Class(d_model, rank, **kwargs)``, ``forward(x [B, N, d_model]) →
  [B, N, d_model]``; kernelgap adds a token embedding and the query-dependent
  readout ``p_i = <a(x_i), y_i> + b(x_i)`` (two-layer MLPs of the raw token).

A library class whose constructor takes other names gets an *argument map*
(``args``): each constructor argument is bound to ``"m"``, ``"rank"``,
``"d_model"`` or a constant, and ``output`` picks one element of a tuple the
module returns.  ``source_hash`` (the SHA-256 of the file that defines the
class) is part of the spec and is computed whenever a spec is made — by the
probe or from a sweep file — so editing the module makes its runs new runs; a
given hash that no longer matches the source is refused.

Whatever the module raises — at import, construction, a check or in training,
``SystemExit`` included — becomes one :class:`ModuleFailure` line naming the
module and the phase (:func:`module_failures`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch
from pydantic import ConfigDict, Field, model_validator
from torch import nn

from ..errors import KernelgapError
from ..io import read_input
from ..limits import MAX_WIDTH
from ..validation import Config, PositiveInt, between, fits, invalid, one_of
from .leash import leashed

INTERFACES = ("sequence", "layer")
#: Sizes an argument map can bind a constructor argument to.
BINDINGS = ("m", "rank", "d_model")
Interface = one_of(INTERFACES, " must be 'sequence' or 'layer', got {shown}")


class ModuleError(KernelgapError):
    """A module or target that does not follow the interface."""


class ModuleImportError(ModuleError):
    """A target whose module cannot be imported (a library that is not installed, say)."""


class ModuleFailure(ModuleError):
    """The module itself raised — while importing, building, being checked or training."""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def describe(exc: BaseException) -> str:
    """``Type: message`` in one line (``SystemExit(3)`` for an exit; a kernelgap error's message)."""
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    if isinstance(exc, KernelgapError):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)}"


def target_label(target: str) -> str:
    """How a target is shown in messages: ``file.py:Class`` or ``pkg.mod:Class``."""
    module, sep, attr = target.rpartition(":")
    if sep and module.endswith(".py"):
        return f"{Path(module).name}:{attr}"
    return target


def failure(target: str, phase: str, exc: BaseException, detail: str = "") -> ModuleFailure:
    """``module file.py:Class failed while PHASE DETAIL: Type: message``, one line."""
    return ModuleFailure(f"module {target_label(target)} failed while {phase}{detail}: {describe(exc)}")


@contextlib.contextmanager
def module_failures(target: str | None, phase: str, detail: str = ""):
    """Turn whatever the module raises meanwhile into one :class:`ModuleFailure` line
    (:func:`failure`).  ``SystemExit`` is caught too (a module must not end the process);
    ``KeyboardInterrupt`` is not.  A :class:`ModuleFailure` passes as it is, and so do
    kernelgap errors that are not about the module (a family file, a folder);
    ``target=None`` guards nothing."""
    if target is None:
        yield
        return
    try:
        yield
    except ModuleFailure:
        raise
    except KernelgapError as exc:
        if not isinstance(exc, ModuleError):
            raise
        raise failure(target, phase, exc, detail) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - anything the user's code raises
        raise failure(target, phase, exc, detail) from None


def non_finite(value, path: str) -> tuple[str, float] | None:
    """``(path, number)`` of the first NaN or infinity in a constructor value (nested
    lists and tables too), or None: such a number has no place in strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub, item in items:
        found = non_finite(item, sub)
        if found:
            return found
    return None


def argument_problem(kwargs: dict, args: dict) -> tuple[str | None, str] | None:
    """``(path, text)`` of the first constructor value that cannot be stored or means two
    things — a NaN or an infinity (nested too), or an argument given both as a keyword and
    in the argument map — or None.  The message is ``path`` + ``text``, or with no path
    ``text`` with ``{where}`` standing for the spec's prefix."""
    for name, table in (("kwargs", kwargs), ("args", args)):
        if not isinstance(table, dict):
            return name, f" must be a table of constructor arguments, got {table!r}"
        found = non_finite(table, name)
        if found:
            return found[0], (
                f" must be a finite number, got {found[1]} (constructor arguments "
                "are stored in strict JSON: no NaN or infinity)"
            )
    both = sorted(set(kwargs) & set(args))
    if both:
        return None, f"{both[0]!r} is given both in {{where}}kwargs and in the argument map {{where}}args"
    return None


def check_arguments(kwargs: dict, args: dict, where: str = "model.module") -> None:
    """Constructor values that can be stored and mean one thing (:func:`argument_problem`),
    checked before the module is imported."""
    problem = argument_problem(kwargs, args)
    if problem:
        path, text = problem
        prefix = f"{where}." if where else ""
        raise ModuleError(text.replace("{where}", prefix) if path is None else f"{prefix}{path}{text}")


class ModuleSpec(Config):
    """Which module, with which constructor arguments, behind which interface.

    Making a spec imports the target and sets ``source_hash`` to its source's SHA-256
    (a given one must match it), so every module run — from the probe or from a sweep
    file — is named by the code it trains.  An argument map must bind ``rank``."""

    model_config = ConfigDict(frozen=True)
    WHERE: ClassVar[str] = "model.module"

    target: str = Field(description="package.module:Class or path/to/file.py:Class")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="constructor keyword arguments")
    interface: Interface = "sequence"
    d_model: between(1, MAX_WIDTH) = Field(32, description="embedding width given to a 'layer' module")
    args: dict[str, Any] = Field(
        default_factory=dict, description="argument map: constructor argument → 'm', 'rank', 'd_model' or a constant"
    )
    output: int | None = Field(None, description="index of the prediction in a tuple the module returns")
    source_hash: str = Field("", description="computed from the source; a given one must match it")

    @model_validator(mode="after")
    def _module(self) -> ModuleSpec:
        problem = argument_problem(self.kwargs, self.args)
        if problem:
            path, text = problem
            raise invalid(text.replace("{where}", "{where}."), whole=True) if path is None else invalid(text, path=path)
        cls = load_target(self.target)  # a one-line ModuleError of its own
        actual = source_hash(cls)
        if self.source_hash and self.source_hash != actual:
            raise ModuleError(
                f"source_hash {self.source_hash[:12]}… does not match the source of "
                f"{target_label(self.target)} (sha256 {actual[:12]}…): the module changed since "
                "the hash was written; leave source_hash out, it is computed from the source"
            )
        object.__setattr__(self, "source_hash", actual)
        if self.args and "rank" not in [v for v in self.args.values() if isinstance(v, str)]:
            raise invalid(
                f" binds no constructor argument to rank, so every rank would train the same "
                f"module: {rank_hint(cls, self)}",
                path="args",
            )
        return self


#: Parts of constructor argument names that usually set a module's state size, likeliest first.
STATE_SIZE = ("feature", "rank", "state", "key_dim", "dim_head", "head_dim", "expand")


def rank_hint(cls: type, spec: ModuleSpec) -> str:
    """Which argument to bind to ``rank``: one named like a state size, else those left unbound."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    free = [
        n
        for n, p in params.items()
        if n not in {*spec.args, *spec.kwargs, "self"} and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    for part in STATE_SIZE:
        likely = [n for n in free if part in n.lower()]
        if likely:
            return f"bind {likely[0]} to it (--arg {likely[0]}=rank)"
    if free:
        return f"bind the argument that sets the state size (--arg NAME=rank; unbound: {', '.join(free)})"
    return "bind the argument that sets the state size (--arg NAME=rank)"


def split_target(target: str) -> tuple[str, str]:
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ModuleError(f"target {target!r} must look like package.module:Class or file.py:Class")
    return module_name, attr


#: Attribute of a module loaded from a file: the SHA-256 of the bytes it was loaded from.
SOURCE_ATTR = "__kernelgap_sha256__"


def load_target(target: str) -> type:
    """``pkg.mod:Class`` or ``path/to/file.py:Class`` → the class (one-line errors).

    A file is loaded once per content: an edited file is loaded anew (its runs are new
    runs), so a process never trains stale code under a new hash."""
    module_name, attr = split_target(target)
    if module_name.endswith(".py"):
        module = _load_file(target, Path(module_name))
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            hint = ""
            if Path(module_name.replace(".", "/") + ".py").is_file():
                hint = (
                    f" (the file {module_name.replace('.', '/')}.py is here: give it as "
                    f"{module_name.replace('.', '/')}.py:{attr}, or run with PYTHONPATH=.)"
                )
            raise ModuleImportError(f"cannot import module {module_name!r}: {one_line(exc)}{hint}") from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the module's
            raise failure(target, "importing", exc) from None
    try:
        cls = getattr(module, attr)
    except AttributeError:
        raise ModuleError(f"module {module_name!r} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a module-level __getattr__
        raise failure(target, "importing", exc) from None
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ModuleError(f"{target} is not a torch.nn.Module subclass")
    return cls


def _load_file(target: str, path: Path):
    raw = read_input(path, "module file", ModuleError)
    digest = hashlib.sha256(raw).hexdigest()
    name = f"kernelgap_external_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}_{digest[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    setattr(module, SOURCE_ATTR, digest)
    sys.modules[name] = module  # as an import would: dataclasses and pickling look it up
    try:
        exec(compile(raw, str(path), "exec"), module.__dict__)  # noqa: S102 - the very bytes hashed above
    except ImportError as exc:
        sys.modules.pop(name, None)
        raise ModuleImportError(f"cannot import {path}: {type(exc).__name__}: {one_line(exc)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any import failure is the module's
        sys.modules.pop(name, None)
        raise failure(target, "importing", exc) from None
    return module


def source_hash(cls: type) -> str:
    """SHA-256 of the file that defines ``cls`` ("" when it has none); for a class of a
    module file, of the bytes it was loaded from."""
    stored = getattr(sys.modules.get(cls.__module__), SOURCE_ATTR, None)
    if stored:
        return stored
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    except OSError:
        return ""


class LayerWrapper(nn.Module):
    """Embedding ``m → d_model``, the user's layer, readout ``<a(x), y> + b(x)``."""

    def __init__(self, layer: nn.Module, m: int, d_model: int, output: int | None, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Linear(m, d_model)
        self.layer = layer
        self.read = nn.Sequential(nn.Linear(m, hidden), nn.GELU(), nn.Linear(hidden, d_model))
        self.bias = nn.Sequential(nn.Linear(m, hidden), nn.GELU(), nn.Linear(hidden, 1))
        self.d_model, self.output = d_model, output

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y = pick_output(self.layer(self.embed(tokens)), self.output)
        if not isinstance(y, torch.Tensor) or y.shape != (*tokens.shape[:2], self.d_model):
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ModuleError(f"a 'layer' module must map [B, N, {self.d_model}] to [B, N, {self.d_model}], got {got}")
        return (self.read(tokens) * y).sum(-1) + self.bias(tokens).squeeze(-1)


class SequenceWrapper(nn.Module):
    """A ``sequence`` module whose output may need picking out of a tuple."""

    def __init__(self, module: nn.Module, output: int | None) -> None:
        super().__init__()
        self.module, self.output = module, output

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return pick_output(self.module(tokens), self.output)


def pick_output(out, index: int | None):
    if index is None:
        return out
    if not isinstance(out, (tuple, list)) or not -len(out) <= index < len(out):
        raise ModuleError(
            f"output {index} was asked for, but the module returned "
            f"{type(out).__name__}{f' of {len(out)}' if isinstance(out, (tuple, list)) else ''}"
        )
    return out[index]


def constructor_args(spec: ModuleSpec, m: int, rank: int) -> tuple[list, dict]:
    """Positional and keyword arguments: the interface's two sizes, or the argument map."""
    sizes = {"m": m, "rank": rank, "d_model": spec.d_model}
    if not spec.args:
        first = spec.d_model if spec.interface == "layer" else m
        return [first, rank], dict(spec.kwargs)
    bound = {k: sizes[v] if isinstance(v, str) and v in BINDINGS else v for k, v in spec.args.items()}
    return [], {**bound, **spec.kwargs}


def build_module(cls: type, spec: ModuleSpec, m: int, rank: int, seed: int) -> nn.Module:
    """Construct (seeded) and wrap; the result maps tokens ``[B, N, m] → [B, N]``."""
    torch.manual_seed(seed)
    args, kwargs = constructor_args(spec, m, rank)
    try:
        module = cls(*args, **kwargs)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's constructor
        shown = ", ".join([*map(str, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise ModuleFailure(
            f"{cls.__name__}({shown}) failed at rank {rank} ({spec.interface} interface): {describe(exc)}"
        ) from None
    if spec.interface == "layer":
        return LayerWrapper(module, m, spec.d_model, spec.output)
    return SequenceWrapper(module, spec.output)


class ModuleModel(nn.Module):
    """One module seen by the stacked trainer as a stack of one member."""

    members = 1
    signed_kernel = False  # no kernel to inspect: a module's attention is opaque
    causal = False

    def __init__(self, module: nn.Module, target: str | None = None) -> None:
        super().__init__()
        self.module, self.target = module, target  # the target names the module in messages
        self.steps, self.shape = 0, None  # training steps so far, the shape of the first's predictions

    def predict(self, tokens: torch.Tensor, index: torch.Tensor, positions: list[int] | None = None) -> torch.Tensor:
        """``[1, S, Q]`` predictions for sequences given as token ids ``index [S, N]``.

        The module always runs with gradients enabled, as in a training step (some
        modules, fla's layers on the CPU among them, fail under ``torch.no_grad``); the
        result is detached where the caller had them disabled.  A call with gradients
        enabled is a training step: its predictions must have the first step's shape (a
        shape that changes would be broadcast against the targets and train on silently)."""
        grad = torch.is_grad_enabled()
        step = self.steps
        what = f"training step {step}" if grad else "an evaluation"
        with torch.enable_grad(), leashed(target_label(self.target) if self.target else None, what):
            out = self.module(tokens[index])
        if grad:
            self.steps += 1
            self._same_shape(out, step)
        if not grad and isinstance(out, torch.Tensor):
            out = out.detach()
        if positions is not None:
            out = out[:, positions]
        return out.unsqueeze(0)

    def _same_shape(self, out, step: int) -> None:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        if self.shape is None:
            self.shape = shape
        elif shape != self.shape:
            label = target_label(self.target) if self.target else type(self.module).__name__
            raise ModuleFailure(
                f"module {label} returned predictions of shape {shape} at training step {step}, where step 0 "
                f"gave {self.shape}: a module's output shape must not change between steps"
            )

    def parameter_counts(self) -> dict[str, int]:
        """Parameters of the module itself and of kernelgap's wrapper (embedding, readout)."""
        inner = self.module.layer if isinstance(self.module, LayerWrapper) else self.module.module
        own = sum(p.numel() for p in inner.parameters())
        return {"module": own, "wrapper": sum(p.numel() for p in self.parameters()) - own}


#: Library classes whose true feature count is read from the built instance (class path →
#: reader): kernelgap's own modules, and any user module, declare ``kernelgap_features``.
LIBRARY_FEATURES: dict[str, Callable[[nn.Module], int]] = {
    # Performer's FAVOR+: nb_features positive random features per head
    "performer_pytorch.performer_pytorch.SelfAttention": lambda mod: mod.fast_attention.nb_features * mod.heads,
    # softmax-normalised query features, dim_head per global head (local heads attend in windows)
    "linear_attention_transformer.linear_attention_transformer.SelfAttention": (
        lambda mod: mod.d_heads * mod.global_attn_heads
    ),
}
#: The attribute by which a module declares its feature count: an int, or a callable of the rank.
FEATURES_ATTR = "kernelgap_features"


def declares_features(cls: type) -> bool:
    """Whether :func:`module_features` can tell ``cls``'s feature count without guessing."""
    return hasattr(cls, FEATURES_ATTR) or f"{cls.__module__}.{cls.__qualname__}" in LIBRARY_FEATURES


def module_features(module: nn.Module, rank: int) -> int | None:
    """The true feature count of a built module (the rank of its kernel as built, what the
    lower bound speaks about; docs/theory.md, "The models"), or None when it cannot be
    told: the module's own ``kernelgap_features`` (an int, or called with the rank
    argument), else :data:`LIBRARY_FEATURES`.  A declaration that is not a positive
    integer is a :class:`ModuleError`."""
    inner = module.layer if isinstance(module, LayerWrapper) else getattr(module, "module", module)
    declared = getattr(inner, FEATURES_ATTR, None)
    reader = LIBRARY_FEATURES.get(f"{type(inner).__module__}.{type(inner).__qualname__}")
    if declared is None and reader is None:
        return None
    value = (declared(rank) if callable(declared) else declared) if declared is not None else reader(inner)
    if not fits(PositiveInt, value):
        raise ModuleError(
            f"{type(inner).__name__}.{FEATURES_ATTR} must give a positive integer feature count, got {value!r}"
        )
    return value


def build_external(
    spec: ModuleSpec, m: int, rank: int, seed: int, dtype: torch.dtype, device: str | torch.device = "cpu"
) -> ModuleModel:
    """The module of a run, refused when its source is no longer the one the run names."""
    with leashed(target_label(spec.target), "being built"):
        return _build_external(spec, m, rank, seed, dtype, device)


def _build_external(spec: ModuleSpec, m: int, rank: int, seed: int, dtype, device) -> ModuleModel:
    cls = load_target(spec.target)
    if spec.source_hash and source_hash(cls) != spec.source_hash:
        raise ModuleFailure(
            f"the source of {target_label(spec.target)} changed after the run was configured "
            f"(sha256 {spec.source_hash[:12]}… → {source_hash(cls)[:12]}…); run it again"
        )
    return ModuleModel(build_module(cls, spec, m, rank, seed), spec.target).to(device=device, dtype=dtype)
