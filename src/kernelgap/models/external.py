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
module returns.  ``source_hash`` (the module file's SHA-256) is part of the
spec, so editing the module makes its runs new runs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..errors import KernelgapError

INTERFACES = ("sequence", "layer")
#: Sizes an argument map can bind a constructor argument to.
BINDINGS = ("m", "rank", "d_model")


class ModuleError(KernelgapError):
    """A module or target that does not follow the interface."""


class ModuleImportError(ModuleError):
    """A target whose module cannot be imported (a library that is not installed, say)."""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass(frozen=True)
class ModuleSpec:
    """Which module, with which constructor arguments, behind which interface."""

    target: str
    kwargs: dict = field(default_factory=dict)
    interface: str = "sequence"
    d_model: int = 32
    args: dict = field(default_factory=dict)
    output: int | None = None
    source_hash: str = ""

    def validate(self, where: str = "model.module") -> "ModuleSpec":
        if self.interface not in INTERFACES:
            raise ModuleError(f"{where}.interface must be 'sequence' or 'layer', got {self.interface!r}")
        if self.d_model < 1:
            raise ModuleError(f"{where}.d_model must be ≥ 1, got {self.d_model}")
        return self


def split_target(target: str) -> tuple[str, str]:
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ModuleError(f"target {target!r} must look like package.module:Class or file.py:Class")
    return module_name, attr


def load_target(target: str) -> type:
    """``pkg.mod:Class`` or ``path/to/file.py:Class`` → the class (one-line errors)."""
    module_name, attr = split_target(target)
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ModuleError(f"module file {path} does not exist")
        name = f"kernelgap_external_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except ImportError as exc:
                raise ModuleImportError(f"cannot import {path}: {type(exc).__name__}: {one_line(exc)}") from None
            except Exception as exc:  # noqa: BLE001 - any import failure is the user's
                raise ModuleError(f"cannot import {path}: {type(exc).__name__}: {one_line(exc)}") from None
            sys.modules[name] = module
        module = sys.modules[name]
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            hint = ""
            if Path(module_name.replace(".", "/") + ".py").is_file():
                hint = (f" (the file {module_name.replace('.', '/')}.py is here: give it as "
                        f"{module_name.replace('.', '/')}.py:{attr}, or run with PYTHONPATH=.)")
            raise ModuleImportError(f"cannot import module {module_name!r}: {one_line(exc)}{hint}") from None
        except Exception as exc:  # noqa: BLE001
            raise ModuleError(f"cannot import module {module_name!r}: {type(exc).__name__}: {one_line(exc)}") from None
    if not hasattr(module, attr):
        raise ModuleError(f"module {module_name!r} has no attribute {attr!r}")
    cls = getattr(module, attr)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ModuleError(f"{target} is not a torch.nn.Module subclass")
    return cls


def source_hash(cls: type) -> str:
    """SHA-256 of the file that defines ``cls`` ("" when it has none)."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""


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
        raise ModuleError(f"output {index} was asked for, but the module returned "
                          f"{type(out).__name__}{f' of {len(out)}' if isinstance(out, (tuple, list)) else ''}")
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
    except Exception as exc:  # noqa: BLE001 - the user's constructor
        shown = ", ".join([*map(str, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise ModuleError(f"{cls.__name__}({shown}) failed at rank {rank} ({spec.interface} interface): "
                          f"{type(exc).__name__}: {one_line(exc)}") from None
    if spec.interface == "layer":
        return LayerWrapper(module, m, spec.d_model, spec.output)
    return SequenceWrapper(module, spec.output)


class ModuleModel(nn.Module):
    """One module seen by the stacked trainer as a stack of one member."""

    members = 1
    signed_kernel = False  # no kernel to inspect: a module's attention is opaque
    causal = False

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def predict(self, tokens: torch.Tensor, index: torch.Tensor,
                positions: list[int] | None = None) -> torch.Tensor:
        """``[1, S, Q]`` predictions for sequences given as token ids ``index [S, N]``."""
        out = self.module(tokens[index])
        if positions is not None:
            out = out[:, positions]
        return out.unsqueeze(0)

    def parameter_counts(self) -> dict[str, int]:
        """Parameters of the module itself and of kernelgap's wrapper (embedding, readout)."""
        inner = self.module.layer if isinstance(self.module, LayerWrapper) else self.module.module
        own = sum(p.numel() for p in inner.parameters())
        return {"module": own, "wrapper": sum(p.numel() for p in self.parameters()) - own}


def build_external(spec: ModuleSpec, m: int, rank: int, seed: int, dtype: torch.dtype,
                   device: str | torch.device = "cpu") -> ModuleModel:
    return ModuleModel(build_module(load_target(spec.target), spec, m, rank, seed)).to(device=device, dtype=dtype)
