"""The probed module, checked before anything trains: its spec (:func:`module_spec`), one
forward and backward pass at a rank the probe uses (:func:`check_module`), its causality
(:func:`reading_of`) and its true feature count per rank (:func:`feature_counts`).  The
interfaces a module can follow are described in :mod:`kernelgap.models.external`."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from ..errors import KernelgapError
from ..models.external import (
    ModuleModel,
    ModuleSpec,
    build_module,
    check_arguments,
    declares_features,
    load_target,
    module_failures,
    module_features,
    split_target,
)


def module_spec(
    target: str,
    kwargs: dict | None = None,
    interface: str | None = None,
    d_model: int = 32,
    args: dict | None = None,
    output: int | None = None,
) -> tuple[type, ModuleSpec]:
    """The class and its spec; a file target is made absolute (before the module's code can
    change the working folder) so any worker can import it.  The arguments are checked before
    the module is imported."""
    check_arguments(kwargs if kwargs is not None else {}, args if args is not None else {}, "")
    module, attr = split_target(target)
    given, target = target, f"{Path(module).resolve()}:{attr}" if module.endswith(".py") else target
    cls = load_target(given)
    if interface is None:  # unset: the class's own (an empty string is a value, and refused)
        interface = getattr(cls, "kernelgap_interface", "sequence")
    if not args and (first := sole_size(cls)):  # Class(d_model) or Class(m): no rank to give
        args = {first: "d_model" if interface == "layer" else "m"}
    spec = ModuleSpec.parse(
        {
            "target": target,
            "kwargs": dict(kwargs or {}),
            "interface": interface,
            "d_model": d_model,
            "args": dict(args or {}),
            "output": output,
        },
        where="module",
    )
    return cls, spec


def sole_size(cls: type) -> str | None:
    """The name of the one positional constructor argument of a class that takes no second
    (``Class(d_model, *, heads=1)``): the interface's size, and no rank (a rank-free module,
    :attr:`~kernelgap.models.module_spec.ModuleSpec.rank_free`); else None."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # self
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    return positional[0].name if len(positional) == 1 else None


def further_inputs(cls: type) -> list[str]:
    """The arguments ``cls.forward`` requires besides its input (a key and a value, a mask, a
    cache): none where it can be called as ``forward(x)``."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())[1:]  # self
    except (TypeError, ValueError, AttributeError):
        return []
    required = [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return required[1:]


def check_module(cls: type, spec: ModuleSpec, m: int, rank: int, family=None) -> ModuleModel:
    """Build the module at a rank the run will use and run it as training does (gradients
    enabled): a batch of 2 checks the interface, then, given ``family``, one forward and
    backward pass over the whole family (the batch a training step uses).  Anything the
    module raises is one line naming it and the phase."""
    model = ModuleModel(build_module(cls, spec, m, rank, seed=0), spec.target)
    if not any(p.requires_grad for p in model.parameters()):
        raise KernelgapError(f"{cls.__name__} has no trainable parameters")
    tokens = torch.randint(0, 2, (2, 3, m)).float()
    where = f"{cls.__name__} at rank {rank} ({spec.interface} interface)"
    if more := further_inputs(cls):
        raise KernelgapError(
            f"{where}: its forward needs {', '.join(more)} besides the input, and kernelgap calls forward(x) "
            "alone; wrap it in a module whose forward(x) passes them (kernelgap.probe.examples:SoftmaxAttention "
            "does for torch's nn.MultiheadAttention)"
        )
    with (
        module_failures(spec.target, "checking the interface", f" at rank {rank} on tokens [2, 3, {m}]"),
        torch.enable_grad(),
    ):
        out = model.module(tokens)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, 3):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise KernelgapError(
            f"{where} does not follow the interface: tokens [2, 3, {m}] must give predictions [2, 3], got {got}"
        )
    if family is not None:
        index = torch.as_tensor(family.index)
        shape = (len(family), family.length)
        with (
            module_failures(
                spec.target,
                "checking a training step",
                f" at rank {rank} on the {family.name} family ({shape[0]} sequences)",
            ),
            torch.enable_grad(),
        ):
            pred = model.predict(torch.as_tensor(family.tokens).float(), index)
            if tuple(pred.shape) != (1, *shape):
                raise KernelgapError(
                    f"{where} does not follow the interface: tokens [{shape[0]}, {shape[1]}, "
                    f"{m}] must give predictions [{shape[0]}, {shape[1]}], "
                    f"got {tuple(pred.shape[1:])}"
                )
            if not pred.requires_grad:
                raise KernelgapError(
                    f"{where}: its predictions do not depend on its parameters (no gradient reaches them)"
                )
            pred.sum().backward()
        model.zero_grad(set_to_none=True)
    return model


def reading_of(model: ModuleModel, m: int, trials: int = 64) -> str:
    """``"final"`` when the first position's output ignores the other tokens (a causal
    module: position 1 sees only itself), else ``"first"``.  The module runs as in
    training (gradients enabled); outputs that are not finite tell nothing (a module that
    gives NaN reads ``"first"`` and its runs diverge, a result like any other)."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 2, (trials, 3, m), generator=gen).float()
    moved = tokens.clone()
    moved[:, 1:] = torch.randint(0, 2, (trials, 2, m), generator=gen).float()
    with module_failures(model.target, "checking causality", f" on tokens [{trials}, 3, {m}]"), torch.enable_grad():
        before, after = model.module(tokens)[:, 0].detach(), model.module(moved)[:, 0].detach()
    finite = torch.isfinite(before)
    if not finite.any() or not torch.equal(finite, torch.isfinite(after)):
        return "first"
    before, after = before[finite], after[finite]
    scale = before.abs().max().clamp_min(1.0)
    return "final" if torch.allclose(before, after, atol=1e-6 * float(scale), rtol=0) else "first"


def feature_counts(cls: type, spec: ModuleSpec, m: int, ranks: list[int]) -> list[int | None]:
    """The module's true feature count at each rank (built at each, seed 0), or None per
    rank when the class declares none (:func:`~kernelgap.models.external.declares_features`)."""
    if not declares_features(cls):
        return [None] * len(ranks)
    out = []
    for rank in ranks:
        with module_failures(spec.target, "reading its feature count", f" at rank {rank}"):
            out.append(module_features(build_module(cls, spec, m, rank, seed=0), rank))
    return out
