"""Attention modules written elsewhere, as models the stacked trainer can train.

A module is named by a *target*, ``package.module:Class`` or
``path/to/file.py:Class``, and follows one of two interfaces:

* ``"sequence"`` — ``Class(m, rank, **kwargs)``, ``forward(tokens [B, N, m]) → [B, N]``;
* ``"layer"`` — ``Class(d_model, rank, **kwargs)``, ``forward(x [B, N, d_model]) →
  [B, N, d_model]``; kernelgap adds a token embedding and the query-dependent
  readout ``p_i = <a(x_i), y_i> + b(x_i)`` (two-layer MLPs of the raw token).

A library class whose constructor takes other names gets an *argument map* (``args``) binding
each constructor argument to ``"m"``, ``"rank"``, ``"d_model"`` or a constant; ``output``
picks one element of a tuple the module returns.  Naming, loading and hashing a module is
torch-free (:mod:`.module_spec`); whatever the module raises becomes one
:class:`ModuleFailure` line naming the module and the phase.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..validation import PositiveInt, fits
from .leash import leashed
from .module_spec import (  # noqa: F401 (re-exported: the torch-free half)
    BINDINGS,
    LibraryImportError,
    ModuleError,
    ModuleFailure,
    ModuleImportError,
    ModuleSpec,
    check_arguments,
    describe,
    load_target,
    module_failures,
    source_hash,
    split_target,
    target_label,
)


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
            raise ModuleError(
                f"a 'layer' module must map [B, N, {self.d_model}] to [B, N, {self.d_model}], got {_shown(y, self.d_model)}"
            )
        return (self.read(tokens) * y).sum(-1) + self.bias(tokens).squeeze(-1)


def _shown(y, d_model: int) -> str:
    """What a layer returned instead, and what to pass: ``--output`` for a tuple, ``--d-model``
    for another width."""
    if isinstance(y, (tuple, list)):
        return f"a {type(y).__name__} of {len(y)}: pass --output INDEX, the place of its output in it"
    if not isinstance(y, torch.Tensor):
        return type(y).__name__
    if y.dim() == 3 and y.shape[-1] != d_model:
        return (
            f"{tuple(y.shape)}: its width {y.shape[-1]} is not d_model {d_model}; pass --d-model {y.shape[-1]}, "
            "or bind its width argument to d_model (--arg NAME=d_model)"
        )
    return str(tuple(y.shape))


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
        """``[1, S, Q]`` predictions for sequences given as token ids ``index [S, N]``.  The module
        always runs with gradients enabled (some fail under ``no_grad``); a call with them
        enabled is a training step, whose predictions must keep the first step's shape (a
        changed shape would broadcast against the targets silently)."""
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


#: Library classes whose true feature count is read from the built instance (class path → reader).
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
    """The true feature count of a built module (the rank of its kernel, what the lower bound
    speaks about), or None when it cannot be told: its own ``kernelgap_features`` (an int, or
    a callable of the rank), else :data:`LIBRARY_FEATURES`."""
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
        cls = load_target(spec.target)
        if spec.source_hash and source_hash(cls) != spec.source_hash:
            raise ModuleFailure(
                f"the source of {target_label(spec.target)} changed after the run was configured "
                f"(sha256 {spec.source_hash[:12]}… → {source_hash(cls)[:12]}…); run it again"
            )
        return ModuleModel(build_module(cls, spec, m, rank, seed), spec.target).to(device=device, dtype=dtype)
