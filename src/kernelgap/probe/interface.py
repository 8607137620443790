"""Import a user's module, check it follows the probe interface, adapt it to the trainer."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path

import torch
from torch import nn

from ..errors import KernelgapError

INTERFACES = ("sequence", "layer")
#: Width of the embedding a "layer" module receives (``--d-model``).
D_MODEL = 32


class ProbeError(KernelgapError):
    """A module or target that does not follow the probe interface."""


def parse_kwargs(text: str | None) -> dict:
    """``--kwargs`` JSON → dict (one-line error otherwise)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProbeError(f"--kwargs is not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ProbeError(f"--kwargs must be a JSON object, got {type(value).__name__}")
    return value


def load_target(target: str) -> type:
    """``pkg.mod:Class`` or ``path/to/file.py:Class`` → the class."""
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ProbeError(f"probe target {target!r} must look like package.module:Class or file.py:Class")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ProbeError(f"probe target file {path} does not exist")
        name = f"kernelgap_probe_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's
            raise ProbeError(f"cannot import {path}: {type(exc).__name__}: {_one_line(exc)}") from None
    else:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001
            raise ProbeError(f"cannot import module {module_name!r}: {type(exc).__name__}: {_one_line(exc)}") from None
    if not hasattr(module, attr):
        raise ProbeError(f"module {module_name!r} has no attribute {attr!r}")
    cls = getattr(module, attr)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ProbeError(f"{target} is not a torch.nn.Module subclass")
    interface = getattr(cls, "kernelgap_interface", "sequence")
    if interface not in INTERFACES:
        raise ProbeError(f"{target}.kernelgap_interface must be 'sequence' or 'layer', got {interface!r}")
    return cls


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class LayerWrapper(nn.Module):
    """Embedding ``m → d_model``, the user's layer, readout ``<a(x), y> + b(x)``."""

    def __init__(self, layer: nn.Module, m: int, d_model: int, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Linear(m, d_model)
        self.layer = layer
        self.read = nn.Sequential(nn.Linear(m, hidden), nn.GELU(), nn.Linear(hidden, d_model))
        self.bias = nn.Sequential(nn.Linear(m, hidden), nn.GELU(), nn.Linear(hidden, 1))
        self.d_model = d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y = self.layer(self.embed(tokens))
        if not isinstance(y, torch.Tensor) or y.shape != (*tokens.shape[:2], self.d_model):
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ProbeError(f"a 'layer' module must map [B, N, {self.d_model}] to [B, N, {self.d_model}], got {got}")
        return (self.read(tokens) * y).sum(-1) + self.bias(tokens).squeeze(-1)


def build_module(cls: type, m: int, rank: int, kwargs: dict, seed: int,
                 d_model: int = D_MODEL) -> nn.Module:
    """Construct (seeded) and wrap when needed; the result maps ``[B, N, m] → [B, N]``."""
    torch.manual_seed(seed)
    interface = getattr(cls, "kernelgap_interface", "sequence")
    first = d_model if interface == "layer" else m
    try:
        module = cls(first, rank, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the user's constructor
        args = "d_model, rank" if interface == "layer" else "m, rank"
        raise ProbeError(f"{cls.__name__}({args}, **kwargs) failed: {type(exc).__name__}: {_one_line(exc)}") from None
    if interface == "layer":
        module = LayerWrapper(module, m, d_model)
    return module


def check_interface(cls: type, m: int, kwargs: dict, d_model: int = D_MODEL) -> str:
    """Build a rank-2 module and run a dummy batch through it; return the interface name."""
    module = build_module(cls, m, 2, kwargs, seed=0, d_model=d_model)
    if not any(p.requires_grad for p in module.parameters()):
        raise ProbeError(f"{cls.__name__} has no trainable parameters")
    x = torch.randint(0, 2, (2, 3, m)).float()
    try:
        out = module(x)
    except ProbeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's forward
        raise ProbeError(f"{cls.__name__}.forward failed on tokens [2, 3, {m}]: "
                         f"{type(exc).__name__}: {_one_line(exc)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, 3):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ProbeError(f"{cls.__name__} does not follow the probe interface: forward(tokens [B, N, m]) "
                         f"must return predictions [B, N] = (2, 3), got {got}")
    return getattr(cls, "kernelgap_interface", "sequence")


class ProbeAdapter(nn.Module):
    """One user module seen by the stacked trainer as a stack of one member."""

    members = 1
    signed_kernel = False  # no kernel to inspect: a user module's attention is opaque

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
