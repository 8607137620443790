"""Finite-precision kernel sketches.

A kernel attention head never needs the pairwise weights: a query at position
``i`` only sees the keys through the **sketch**

    S = Σ_j φ_K(x_j) v(x_j)ᵀ   ∈ R^{r × d_v}        z = Σ_j φ_K(x_j)   ∈ R^r

(sums over the positions the query attends to), and predicts

    y_i = φ_Q(x_i)ᵀ S / φ_Q(x_i)ᵀ z,        p_i = Σ_h <a_h(x_i), y_{h,i}> + b(x_i).

:func:`sketch_predict` evaluates a trained :class:`~kernelgap.models.AttentionModel`
this way with ``S`` and ``z`` rounded to ``b`` bits per number by one of two
quantizers (:func:`quantize`):

* ``"uniform"`` — symmetric uniform, one scale per sketch tensor:
  ``Δ = max|u| / (2^{b−1} − 1)``, ``q(u) = Δ·round(u/Δ)``; ``b`` bits include
  the sign, so ``2^b − 1`` levels; ``|q(u) − u| ≤ Δ/2``.  ``S`` and ``z`` get
  separate scales (one per sequence, query position and head).
* ``"float"`` — a float with a ``b``-bit significand and unbounded exponent:
  ``u = f·2^e`` with ``f ∈ [1/2, 1)``, ``q(u) = round(f·2^b)·2^{e−b}``;
  ``|q(u) − u| ≤ 2^{e−b−1}`` (half a step at ``u``'s binade), relative error
  ``≤ 2^{−b}``.

Gauge.  ``α`` is unchanged by ``φ_K,k → φ_K,k/λ_k``, ``φ_Q,k → λ_k φ_Q,k``, and normalized
attention by a per-query scale: log-space maps scale each key feature to a largest value of
1 (``λ_k`` moved to the query side, then scaled by its own max), so nothing overflows; other
maps use their raw features.  With ``bits=None`` the result equals :meth:`AttentionModel.predict`
up to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import KernelgapError
from .attention import AttentionModel, guard_denominator
from .scorers import KernelScorer

QUANTIZERS = ("uniform", "float")


def uniform_step(u: torch.Tensor, bits: int, dims: tuple[int, ...]) -> torch.Tensor:
    """The step ``Δ = max|u| / (2^{b−1} − 1)`` over ``dims`` (kept as size-1 axes)."""
    return u.abs().amax(dim=dims, keepdim=True) / (2 ** (bits - 1) - 1)


def quantize(u: torch.Tensor, bits: int | None, mode: str = "uniform", dims: tuple[int, ...] = ()) -> torch.Tensor:
    """Round ``u`` to ``bits`` bits per number (module docstring); ``dims``: the axes one
    uniform scale is shared over (``()``: the whole tensor)."""
    if bits is None:
        return u
    if mode not in QUANTIZERS:
        raise KernelgapError(f"quantizer must be one of {', '.join(QUANTIZERS)}, got {mode!r}")
    if mode == "uniform":
        if bits < 2:
            raise KernelgapError(f"the uniform quantizer needs bits ≥ 2 (one is the sign), got {bits}")
        step = uniform_step(u, bits, dims or tuple(range(u.dim())))
        safe = torch.where(step > 0, step, torch.ones_like(step))
        return torch.where(step > 0, torch.round(u / safe) * safe, torch.zeros_like(u))
    if bits < 1:
        raise KernelgapError(f"the float quantizer needs bits ≥ 1, got {bits}")
    mant, exp = torch.frexp(u)  # u = mant · 2^exp, |mant| ∈ [1/2, 1)
    return torch.ldexp(torch.round(torch.ldexp(mant, torch.tensor(bits))), exp - bits)


def _features(model: AttentionModel, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Linear-space ``φ_Q [E, H, T, r]`` and ``φ_K [E, H, P, T, r]`` in the documented gauge."""
    scorer = model.scorer
    if not isinstance(scorer, KernelScorer):
        raise KernelgapError("only kernel models have a sketch (dense softmax has none)")
    e, h, t = scorer.members, scorer.heads, tokens.shape[0]
    ids = scorer.token_ids(tokens)
    q = scorer.query(tokens, ids)
    k = scorer.key(tokens, ids)
    r = q.shape[-1]
    q = q.reshape(e, h, t, r)
    k = k.reshape(e, h, scorer.key_positions, t, r)
    mask = scorer.rank_mask[:, None, :].bool()  # [E, 1, r]
    if not scorer.log_space:
        return q * mask[:, :, None, :], k * mask[:, :, None, None, :]
    neg = torch.tensor(float("-inf"), dtype=q.dtype, device=q.device)
    k = torch.where(mask[:, :, None, None, :], k, neg)
    c = k.amax(dim=(2, 3))  # [E, H, r]: log λ_k
    c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))
    phi_k = torch.exp(k - c[:, :, None, None, :])
    lq = torch.where(mask[:, :, None, :], q + c[:, :, None, :], neg)
    phi_q = torch.exp(lq - lq.amax(-1, keepdim=True))
    return phi_q, phi_k


@dataclass
class Sketch:
    """A model's full-precision sketch on sequences, and what reads it (see :func:`build_sketch`)."""

    sk: torch.Tensor  # Σ_j φ_K(x_j) v(x_j)ᵀ  [E, H, S, Q|1, r, dv]
    zk: torch.Tensor  # Σ_j φ_K(x_j)           [E, H, S, Q|1, r]
    fq: torch.Tensor  # φ_Q of each query      [E, H, S, Q, r]
    aq: torch.Tensor  # readout vector a(x_i)  [E, H, S, Q, dv]
    bias: torch.Tensor  # b(x_i)                [E, S, Q]
    signed: bool  # linear-space features: the denominator is guarded


@torch.no_grad()
def build_sketch(
    model: AttentionModel, tokens: torch.Tensor, index: torch.Tensor, positions: list[int] | None = None
) -> Sketch:
    """The sums every head's queries read, before quantization."""
    n = index.shape[1]
    positions = list(range(n)) if positions is None else positions
    phi_q, phi_k = _features(model, tokens)
    p_count = phi_k.shape[2]
    ro = model.readout
    v, a, bias = ro.values(tokens), ro.read_vectors(tokens)[:, :, 0], ro.biases(tokens)  # [E,H,P,T,dv], [E,H,T,dv]
    key_pos = torch.arange(n) * int(p_count > 1)
    kf = phi_k[:, :, key_pos, index]  # [E, H, S, N, r]  (advanced indexing over P and T)
    vf = v[:, :, key_pos, index]  # [E, H, S, N, dv]
    qpos = torch.tensor(positions, dtype=torch.long)
    if model.causal:
        sk = torch.cumsum(kf[..., :, None] * vf[..., None, :], dim=3)[:, :, :, qpos]  # [E,H,S,Q,r,dv]
        zk = torch.cumsum(kf, dim=3)[:, :, :, qpos]  # [E,H,S,Q,r]
    else:
        sk = (kf[..., :, None] * vf[..., None, :]).sum(3)[:, :, :, None]  # [E,H,S,1,r,dv]
        zk = kf.sum(3)[:, :, :, None]  # [E,H,S,1,r]
    q_ids = index[:, qpos]  # [S, Q]
    return Sketch(sk, zk, phi_q[:, :, q_ids], a[:, :, q_ids], bias[:, q_ids], not model.scorer.log_space)


@torch.no_grad()
def read_sketch(sketch: Sketch, bits: int | None = None, mode: str = "uniform") -> torch.Tensor:
    """Predictions ``[E, S, Q]`` read through the sketch quantized to ``bits`` (``None``: exact)."""
    sk = quantize(sketch.sk, bits, mode, dims=(-2, -1))
    zk = quantize(sketch.zk, bits, mode, dims=(-1,))
    num = (sketch.fq[..., :, None] * sk).sum(-2)  # [E, H, S, Q, dv]
    den = (sketch.fq * zk).sum(-1)  # [E, H, S, Q]
    if sketch.signed:
        den = guard_denominator(den)
    y = num / den[..., None]
    return (sketch.aq * y).sum(-1).sum(1) + sketch.bias


def sketch_predict(
    model: AttentionModel,
    tokens: torch.Tensor,
    index: torch.Tensor,
    positions: list[int] | None = None,
    bits: int | None = None,
    mode: str = "uniform",
) -> torch.Tensor:
    """Predictions ``[E, S, Q]`` through the (quantized) sketch of every head."""
    return read_sketch(build_sketch(model, tokens, index, positions), bits, mode)


def sketch_numbers(model: AttentionModel) -> list[int]:
    """Numbers in one query's sketch per member: ``H · r_e · (d_v + 1)`` (``S`` and ``z`` of every head)."""
    scorer = model.scorer
    if not isinstance(scorer, KernelScorer):
        raise KernelgapError("only kernel models have a sketch (dense softmax has none)")
    d_v = model.readout.value  # its output width is d_v
    width = d_v.out.weight.shape[-1] if hasattr(d_v, "out") else d_v.weight.shape[-1]
    return [scorer.heads * int(r) * (width + 1) for r in scorer.rank_mask.sum(1).tolist()]
