"""What kind of map a module is, measured before it trains (docs/theory.md, "The additivity
certificate"): :func:`structure`, a :class:`Structure`.

The module's output ``y_i`` at every position (a ``layer`` module: the vector the layer gives
the readout; a ``sequence`` module: its prediction) is read on random sequences of
``{0,1}^m``, at its initial weights and at one more weight draw, and six numbers are taken,
each relative to the output's scale (the RMS of every ``y`` read; ``context`` a log, relative
itself) and the largest over draws (None where an output is not finite: nothing is told):

* ``interaction`` — the rectangle ``|y_i(c, c') + y_i(d, d') − y_i(c, d') − y_i(d, c')|`` over
  the two other positions' tokens: 0 for every draw exactly when ``y_i`` is additive in its
  candidates, ``F_i(x_i) + Σ_j H_ij(x_i, x_j)``;
* ``duplication`` — the change of ``y_i`` when every token is written twice: 0 for a layer
  normalised by its attention mass (``Σ α v / Σ α``), doubled terms for one that is not;
* ``gate`` — how far the rectangle's side ``y_i(c, u) − y_i(d, u)`` at the earlier candidate
  ``a`` is from one multiple ``ρ`` of itself when the later candidate ``b`` holds another token
  ``w`` (fixed over the sequences, whose queries and earlier candidates vary): 0 when the
  candidates meet only through a scalar gate of the later one's token,
  ``F_i + H_ib(x_b) + γ_i(x_b)·H_ia(x_i, x_a)`` (Mamba2's selective decay without its convolution);
* ``order`` — the change of ``y_i`` when its two candidates swap places: 0 for a
  position-free layer, not for gated, decayed or positional ones;
* ``context`` — ``|log (Z_c/Z_d)(Z_d/Z_e)(Z_e/Z_c)|`` of the weights ``Z`` a candidate holds in
  the query's normalised sum, read off the outputs with one candidate and with two
  (:func:`_context_cycle`; the median over sequences): 0 for fixed weights, not for keys
  normalised over their sequence first (linear-attention-transformer's softmax over the keys);
* ``rms_spread`` — ``(max − min) / mean`` of the RMS of ``y_i`` over its features: 0 for an
  output normalised over its features (None for a scalar output).

``signed`` is read where the module exposes its weights (``kernelgap_weights(x)``, ``α
[B, N, N]`` on the layer's input): whether one is negative; else None (not measured).

The kind (:data:`KINDS`), the first that holds: the module's own ``kernelgap_kind``;
``additive`` (interaction 0); ``scalar-gated`` (gate 0); ``output-normalised`` (RMS spread 0); ``normalised kernel``
(duplication, order and context 0 — context None for a scalar output —, not signed, and a kernel of finite rank declared:
``kernelgap_features`` or ``kernelgap_kernel``); ``normalised`` (the same, signed or without a
declared finite rank, softmax: rank-free); ``gated/other``.  Zero means at most :data:`ZERO`.  The
module is read in float64 where it runs so (a copy), else as it is (``precision``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Literal, get_args

import torch
from pydantic import BaseModel, ConfigDict
from torch import nn

from ..models.external import LayerWrapper, ModuleModel, SequenceWrapper, declares_features, pick_output
from .twin import KERNEL_ATTR

#: The kinds of map (module docstring); what the verdicts make of each: :mod:`.verdicts`.
Kind = Literal["normalised kernel", "additive", "scalar-gated", "normalised", "output-normalised", "gated/other"]
KINDS = get_args(Kind)
#: A measured number at most this (relative to the output's scale) counts as zero: float32
#: rounding of an exact identity stays below it, a weight that varies by a part in 10⁴ does not.
ZERO = 1e-5
#: Random sequences read per weight draw.
SEQUENCES = 64
#: Sequences whose candidates' two sides are nearer parallel than this (the smaller singular
#: value over the larger) are left out of the context measure: a weight there is about 0.
CONDITION = 1e-4
#: Tokens tried at the later candidate by the gate measure: the first, against each other.
GATE_TOKENS = 4
#: The attribute by which a module states its kind, and the method exposing its weights.
KIND_ATTR, WEIGHTS_ATTR = "kernelgap_kind", "kernelgap_weights"


class Structure(BaseModel):
    """The check's numbers (module docstring), the kind they make and whether it was declared."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    declared: bool
    interaction: float | None
    gate: float | None
    duplication: float | None
    order: float | None
    context: float | None
    rms_spread: float | None
    signed: bool | None
    draws: int
    precision: str
    sequences: int
    length: int


def structure(
    module: nn.Module | Callable[[int], nn.Module],
    m: int,
    interface: str = "sequence",
    d_model: int = 32,
    length: int = 3,
    kernel: bool | None = None,
) -> Structure:
    """Measure ``module`` (or ``module(seed)`` built at seeds 0 and 1: the second weight draw)
    on ``SEQUENCES`` random sequences of ``length ≥ 3`` tokens of ``{0,1}^m``.  A bare ``layer``
    module (``[B, N, d_model] → [B, N, d_model]``) is read behind the probe's embedding; a
    module of the probe (:class:`~kernelgap.models.external.ModuleModel` or its wrappers) as
    built.  ``kernel``: whether it is a nonnegative kernel of finite rank (None: declared by
    ``kernelgap_features`` or ``kernelgap_kernel``)."""
    if length < 3:
        raise ValueError(f"the structure check needs a query and two candidates: length ≥ 3, got {length}")
    draws = [module] if isinstance(module, nn.Module) else [module(0), module(1)]
    inner = _reader(draws[0], m, interface, d_model)[2]
    numbers, precision = [], "float64"
    for seed, draw in enumerate(draws):
        try:
            numbers.append(_measure(*_reader(copy.deepcopy(draw).double(), m, interface, d_model), m, length, seed))
        except Exception:  # noqa: BLE001 - a module that does not run in float64: read as it is
            numbers.append(_measure(*_reader(draw, m, interface, d_model), m, length, seed))
            precision = "float32"
    top = {k: None if any(n[k] is None for n in numbers) else max(n[k] for n in numbers) for k in numbers[0]}
    signed = None if all(n["signed"] is None for n in numbers) else any(n["signed"] for n in numbers)
    if kernel is None:
        kernel = declares_features(type(inner)) or isinstance(getattr(inner, KERNEL_ATTR, None), str)
    declared = getattr(inner, KIND_ATTR, None)
    kind = declared if declared in KINDS else _kind(top, signed, kernel)
    return Structure(
        kind=kind,
        declared=declared in KINDS,
        interaction=top["interaction"],
        gate=top["gate"],
        duplication=top["duplication"],
        order=top["order"],
        context=top["context"],
        rms_spread=top["rms_spread"],
        signed=signed,
        draws=len(draws),
        precision=precision,
        sequences=SEQUENCES,
        length=length,
    )


def _kind(top: dict, signed: bool | None, kernel: bool) -> str:
    def zero(key: str) -> bool:
        return top[key] is not None and top[key] <= ZERO

    if zero("interaction"):
        return "additive"
    if zero("gate"):
        return "scalar-gated"
    if zero("rms_spread"):
        return "output-normalised"
    if zero("duplication") and zero("order"):
        fixed = top["context"] is None or top["context"] <= ZERO  # a scalar output cannot tell
        return "normalised kernel" if kernel and fixed and not signed else "normalised"
    return "gated/other"


def _reader(module: nn.Module, m: int, interface: str, d_model: int) -> tuple[Callable, Callable, nn.Module]:
    """``(tokens [B, N, m] → y [B, N, D], tokens → the innermost module's input, that module)``."""
    inner = module.module if isinstance(module, ModuleModel) else module
    if isinstance(inner, SequenceWrapper):
        return (lambda t: inner(t).reshape(*t.shape[:2], -1)), (lambda t: t), inner.module
    if not isinstance(inner, LayerWrapper) and interface == "layer":
        with torch.random.fork_rng(devices=[]):  # the embedding drawn at seed 0, no global state changed
            torch.manual_seed(0)
            inner = LayerWrapper(inner, m, d_model, None).to(next(inner.parameters(), torch.empty(0)).dtype)
    if isinstance(inner, LayerWrapper):
        return (lambda t: pick_output(inner.layer(inner.embed(t)), inner.output)), inner.embed, inner.layer
    return (lambda t: inner(t).reshape(*t.shape[:2], -1)), (lambda t: t), inner


def _measure(read: Callable, feed: Callable, inner: nn.Module, m: int, length: int, seed: int) -> dict:
    """The numbers and ``signed`` of one weight draw (module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    dtype = next(inner.parameters(), torch.empty(0)).dtype
    x = torch.randint(0, 2, (SEQUENCES, length, m), generator=gen).to(dtype)
    alt = torch.randint(0, 2, (SEQUENCES, length, m), generator=gen).to(dtype)
    candidates = torch.randint(0, 2, (SEQUENCES, 3, m), generator=gen).to(dtype)

    def at(tokens, i=slice(None)):
        return read(tokens)[:, i].detach().double()

    with torch.enable_grad():  # as in training: some modules fail under no_grad
        y = at(x)
        inter, gate, order = [], [], []
        for i in range(length):
            a, b = [j for j in range(length) if j != i][:2]
            ys = [y[:, i]] + [at(_put(x, a, ca, b, cb), i) for ca, cb in ((alt, alt), (x, alt), (alt, x))]
            inter.append((ys[0] + ys[1] - ys[2] - ys[3]).abs().max())
            gate.append(
                _gate_residual(lambda later, earlier, a=a, b=b, i=i: at(_put(x, a, earlier, b, later), i), x, alt)
            )
            perm = list(range(length))
            perm[a], perm[b] = b, a
            order.append((at(x[:, perm], i) - y[:, i]).abs().max())
        twice = at(x.repeat_interleave(2, dim=1))[:, 1::2]  # each token's last copy
        context = _context_cycle(lambda tokens: at(tokens, -1), x, y[:, -1], candidates)
        weights = getattr(inner, WEIGHTS_ATTR, None)
        signed = bool((weights(feed(x)) < 0).any()) if callable(weights) else None
    scale = float(y.pow(2).mean().sqrt().clamp_min(1e-12))
    rms = y.pow(2).mean(-1).sqrt()
    numbers = {
        "interaction": float(torch.stack(inter).max()) / scale,  # max propagates NaN
        "gate": float(torch.stack(gate).max()) / scale,
        "duplication": float((twice - y).abs().max()) / scale,
        "order": float(torch.stack(order).max()) / scale,
        "context": context,
        "rms_spread": float((rms.max() - rms.min()) / rms.mean().clamp_min(1e-12)) if y.shape[-1] > 1 else None,
    }
    finite = {k: v if v is not None and math.isfinite(v) else None for k, v in numbers.items()}
    return {**finite, "signed": signed}


def _put(x: torch.Tensor, a: int, at_a: torch.Tensor, b: int, at_b: torch.Tensor) -> torch.Tensor:
    """``x`` with position ``a`` taken from ``at_a`` and ``b`` from ``at_b``."""
    out = x.clone()
    out[:, a], out[:, b] = at_a[:, a], at_b[:, b]
    return out


def _context_cycle(read: Callable, x: torch.Tensor, base: torch.Tensor, tokens: torch.Tensor) -> float | None:
    """The median over sequences of ``|log (Z_c/Z_d)(Z_d/Z_e)(Z_e/Z_c)|``: 0 when a candidate's
    weight in the query's normalised sum is the same whatever the other candidate (a fixed
    kernel), not when the weights are normalised over the sequence first (lat's keys).

    ``read(tokens)`` is the output at the last token: the query, ``x``'s last, read after the
    rest of ``x`` (so that no sequence read is shorter than the check's own) and the candidates
    put before it; ``base`` is its output on ``x`` itself (``u_∅``).
    With ``u_S`` the output after the candidates ``S`` of ``{c, d, e}`` (``tokens``' three
    rows), a mass-normalised layer of fixed weights ``w`` and mass ``s`` without candidates has
    ``u_cd − u_∅ = α (u_c − u_∅) + β (u_d − u_∅)`` with ``α / β = (s + w_c) / (s + w_d) =
    Z_c / Z_d`` (affine maps after the sum keep the coefficients); ``α, β`` by least squares.
    Sequences where two sides are nearly parallel (a weight ≈ 0) are left out; None where none
    is left or the output is a scalar (nothing is told)."""

    if base.shape[-1] < 2:
        return None

    def seq(*middle: torch.Tensor) -> torch.Tensor:
        return read(torch.cat([x[:, :-1], *(t[:, None] for t in middle), x[:, -1:]], dim=1))

    side = [seq(tokens[:, k]) - base for k in range(3)]
    logs, kept = [], torch.ones(base.shape[0], dtype=torch.bool)
    for a, b in ((0, 1), (1, 2), (2, 0)):
        sides = torch.stack([side[a], side[b]], dim=-1)  # [B, D, 2]
        both = seq(tokens[:, a], tokens[:, b]) - base
        kept &= sides.isfinite().all((-1, -2)) & both.isfinite().all(-1)
        sides, both = sides.nan_to_num(0.0, 0.0, 0.0), both.nan_to_num(0.0, 0.0, 0.0)
        coef = torch.linalg.lstsq(sides, both.unsqueeze(-1)).solution.squeeze(-1)
        sv = torch.linalg.svdvals(sides)
        kept &= sv[:, 1] > CONDITION * sv[:, 0]
        logs.append(coef[:, 0].abs().log() - coef[:, 1].abs().log())
    cycle = sum(logs).abs()
    kept &= cycle.isfinite()
    return float(cycle[kept].median()) if bool(kept.any()) else None


def _gate_residual(read: Callable, x: torch.Tensor, alt: torch.Tensor) -> torch.Tensor:
    """The largest distance of the side ``y(x_a, w) − y(alt_a, w)`` from ``ρ_w`` times the side
    at ``u`` (``ρ_w`` by least squares, the larger side the base), over ``GATE_TOKENS − 1``
    tokens ``w`` at the later candidate, the same in every sequence (``u``: ``x``'s first
    row's); ``read(later, earlier)`` is ``y_i`` with the later candidate taken from ``later``
    and the earlier from ``earlier``."""
    sides = []
    for k in range(GATE_TOKENS):
        later = (alt[k : k + 1] if k else x[:1]).expand_as(x)
        sides.append(read(later, x) - read(later, alt))
    worst = sides[0].new_zeros(())
    for other in sides[1:]:
        base, fit = (sides[0], other) if sides[0].norm() >= other.norm() else (other, sides[0])
        rho = (base * fit).sum() / base.pow(2).sum().clamp_min(1e-300)
        worst = torch.maximum(worst, (fit - rho * base).abs().max())
    return worst
