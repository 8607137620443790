"""One layer of normalized attention with a query-dependent affine readout (docs/theory.md, "The models").

    α_ij = α(x_i, x_j) ≥ 0
    y_i  = Σ_j α_ij v(x_j) / Σ_j α_ij
    p_i  = Σ_h <a_h(x_i), y_{h,i}> + b(x_i)

A family has few distinct tokens, so everything is computed on them first: a score table
per head and key position (``log α(x, z)`` for log-space maps and softmax, else ``α(x, z)``),
a value table ``U[x, z] = <a_h(x), v_h(z)>`` and a bias ``b[x]``.  A prediction is then
scalar look-ups, ``p = Σ_h Σ_j w_hj U_h[q, k_j] + b[q]`` with ``w`` the normalized weights.
Parameters are stacked (``E`` members), so E models train as one program.  With a pair
plan (:class:`.scorers.PairPlan`) only the block of pairs a family uses is computed; the dense tables
stay as the reference path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import KernelgapError
from .scorers import PairPlan, Scorer, plan_pairs
from .stacked import StackedLinear, StackedMLP

#: Denominators with |Σ α| below this are guarded (signed kernels; all-zero relu rows).
DENOMINATOR_GUARD = 1e-6
#: Axis of the key positions in gathered scores ``[E, H, N, S, Q]``.
KEY_AXIS = 2


@dataclass
class Tables:
    """Per-token tables: ``scores [E, H, P, T, T]`` (log-weights when ``log_space``), ``values
    [E, H, P, T, T]`` = ``<a_h(x), v_h^(p)(z)>``, ``bias [E, T]``."""

    scores: torch.Tensor
    values: torch.Tensor
    bias: torch.Tensor
    log_space: bool


class Readout(nn.Module):
    """Values ``v_h^(p)(z) ∈ R^{d_v}``, readout vectors ``a_h(x)`` and bias ``b(x)``: affine
    maps of the token (``linear``, the shape of the exact constructions) or two-layer MLPs."""

    def __init__(
        self,
        m: int,
        d_value: int,
        members: int,
        heads: int = 1,
        key_positions: int = 1,
        kind: str = "mlp",
        hidden: int = 64,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.members, self.heads, self.key_positions = members, heads, key_positions

        def make(slots, per_member, d_out):
            if kind == "linear":
                return StackedLinear(slots, m, d_out, per_member, init_scale=init_scale)
            return StackedMLP(slots, m, hidden, d_out, per_member, init_scale=init_scale)

        self.value = make(members * heads * key_positions, heads * key_positions, d_value)
        self.read = make(members * heads, heads, d_value)
        self.bias = make(members, 1, 1)

    def read_vectors(self, tokens: torch.Tensor) -> torch.Tensor:
        """Readout vectors ``a_h(x)`` ``[E, H, 1, T, d]``."""
        return self.read(tokens).reshape(self.members, self.heads, 1, tokens.shape[0], -1)

    def values(self, tokens: torch.Tensor) -> torch.Tensor:
        """Values ``v_h^(p)(z)`` ``[E, H, P, T, d]``."""
        return self.value(tokens).reshape(self.members, self.heads, self.key_positions, tokens.shape[0], -1)

    def biases(self, tokens: torch.Tensor) -> torch.Tensor:
        """``b(x)`` ``[E, T]``."""
        return self.bias(tokens).reshape(self.members, tokens.shape[0])

    def tables(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.read_vectors(tokens) @ self.values(tokens).transpose(-1, -2), self.biases(tokens)

    def block_tables(self, plan: PairPlan):
        """``<a(x), v(z)>`` on ``rows × cols`` and on each row with itself, and the rows' bias."""
        a = self.read_vectors(plan.row_tokens)
        v = self.values(plan.key_tokens)
        return (
            a @ v.index_select(-2, plan.cols_in_keys).transpose(-1, -2),
            (a * v.index_select(-2, plan.rows_in_keys)).sum(-1),
            self.biases(plan.row_tokens),
        )


def guard_denominator(denom: torch.Tensor) -> torch.Tensor:
    """``denom`` with every ``|Σα| <`` :data:`DENOMINATOR_GUARD` replaced by ``±guard`` (its sign kept)."""
    small = denom.abs() < DENOMINATOR_GUARD
    sign = torch.where(denom < 0, -1.0, 1.0).to(denom.dtype)
    return torch.where(small, sign * DENOMINATOR_GUARD, denom)


def gather_pairs(table: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``table [E, H, …]`` read at flat ids into its trailing axes, ``flat [...]`` → ``[E, H, ...]``
    (``index_select`` on the ``[E·H, L]`` view: several times faster on CPU than advanced
    indexing, and than along the last axis of a 3-d view)."""
    e, h = table.shape[:2]
    picked = table.reshape(e * h, -1).index_select(1, flat.reshape(-1))
    return picked.reshape(e, h, *flat.shape)


class AttentionModel(nn.Module):
    """A stack of ``E`` single-layer attention models (kernel or dense softmax).

    ``predict(tokens, index)`` scores sequences given as rows ``index`` of the distinct token
    vectors ``tokens``; a table map indexes its parameters by the tokens' ids in
    :attr:`vocabulary` (``ids``, else found on each call).  With ``causal`` position ``i``
    attends to positions ``1..i`` only.
    """

    def __init__(
        self, scorer: Scorer, readout: Readout, causal: bool = False, position_dependent: bool = False
    ) -> None:
        super().__init__()
        self.scorer, self.readout = scorer, readout
        self.causal = causal
        self.position_dependent = position_dependent

    @property
    def signed_kernel(self) -> bool:
        """Whether the kernel may be negative (its sign use is then recorded)."""
        return not self.scorer.nonnegative

    @property
    def members(self) -> int:
        return self.readout.members

    @property
    def vocabulary(self) -> torch.Tensor | None:
        """The tokens the scorer indexes by id ``[V, m]`` bits (table maps), else None."""
        return getattr(self.scorer, "vocabulary", None)

    def token_ids(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """Rows of ``tokens [T, m]`` in :attr:`vocabulary` (None where the scorer reads the vectors)."""
        return self.scorer.token_ids(tokens)

    def tables(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> Tables:
        scores = self.scorer.scores(tokens, ids)
        values, bias = self.readout.tables(tokens)
        return Tables(scores, values, bias, self.scorer.log_space)

    def predict(
        self,
        tokens: torch.Tensor,
        index: torch.Tensor,
        positions: list[int] | None = None,
        tables: Tables | None = None,
        plan: PairPlan | None = None,
        ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Predictions ``[E, S, len(positions)]`` for sequences ``index [S, N]``; with a
        ``plan`` only the block of pairs the sequences use is computed."""
        if plan is not None:
            return self._predict_planned(plan)
        tables = tables or self.tables(tokens, ids)
        flat, q_ids, allowed = self._pairs(tables, index, positions)
        return (
            self._combine(
                gather_pairs(tables.scores, flat), gather_pairs(tables.values, flat), tables.log_space, allowed
            )
            + tables.bias[:, q_ids]
        )

    def plan(
        self,
        tokens: torch.Tensor,
        index: torch.Tensor,
        positions: list[int] | None = None,
        ids: torch.Tensor | None = None,
    ) -> PairPlan:
        """The pair block of sequences ``index [S, N]`` for this model, bound to the tokens."""
        n = index.shape[1]
        p_count = n if self.position_dependent else 1
        return plan_pairs(index, list(range(n)) if positions is None else positions, p_count, self.causal).bind(
            tokens, self.token_ids(tokens) if ids is None else ids
        )

    def _predict_planned(self, plan: PairPlan) -> torch.Tensor:
        block, diag = self.scorer.block_scores(plan)
        v_block, v_diag, bias = self.readout.block_tables(plan)
        e, h = block.shape[:2]
        # joined as [E·H, L] (a 2-d cat: several times faster on CPU than on a 3-d view)
        scores = torch.cat([block.reshape(e * h, -1), diag.reshape(e * h, -1)], dim=1).reshape(e, h, -1)
        values = torch.cat([v_block.reshape(e * h, -1), v_diag.reshape(e * h, -1)], dim=1).reshape(e, h, -1)
        picked = [gather_pairs(t, plan.flat) for t in (scores, values)]
        q_bias = bias.index_select(1, plan.q_rows.reshape(-1)).reshape(e, *plan.q_rows.shape)
        return self._combine(*picked, self.scorer.log_space, plan.allowed) + q_bias

    def _combine(self, scores, values, log_space: bool, allowed) -> torch.Tensor:
        """``Σ_h Σ_j w_hj U_hj`` from gathered scores and values ``[E, H, N, S, Q]``."""
        weights = self._normalize(scores, log_space, allowed)
        return (weights * values).sum(dim=(1, 2))  # [E, S, Q]

    def _pairs(self, tables: Tables, index: torch.Tensor, positions: list[int] | None):
        """Flat table ids ``[N, S, Q]`` of every (key, query) pair, query ids ``[S, Q]``, causal mask."""
        n, t = index.shape[1], tables.scores.shape[-1]
        positions = list(range(n)) if positions is None else positions
        p_count = tables.scores.shape[2]
        if self.position_dependent and p_count != n:
            raise KernelgapError(f"model has {p_count} key positions, sequences have length {n}")
        key_pos = torch.arange(n, device=index.device) * int(p_count > 1)
        qpos = torch.tensor(positions, device=index.device)
        q_ids = index[:, qpos]  # [S, Q]
        # Key axis first: reducing a strided axis of length N is several times faster on CPU
        # than a softmax over a contiguous innermost axis of length 3.
        flat = (key_pos[:, None, None] * t + q_ids[None, :, :]) * t + index.T[:, :, None]  # [N, S, Q]
        allowed = None
        if self.causal:
            allowed = (torch.arange(n, device=index.device)[:, None] <= qpos[None, :])[:, None, :]  # [N, 1, Q]
        return flat, q_ids, allowed

    @torch.no_grad()
    def kernel_stats(
        self,
        tokens: torch.Tensor,
        index: torch.Tensor,
        positions: list[int] | None = None,
        ids: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """How a kernel's signs are used on sequences ``index``, per member ``[E]``: the share of
        weights ``α < 0``, of denominators ``Σ_j α < 0``, of denominators guarded, and the
        smallest ``|Σ_j α|``."""
        tables = self.tables(tokens, ids)
        flat, _, allowed = self._pairs(tables, index, positions)
        alpha = gather_pairs(tables.scores, flat)  # [E, H, N, S, Q]
        if tables.log_space:
            alpha = alpha.exp()
        if allowed is not None:
            alpha = alpha * allowed
        e = alpha.shape[0]
        weights, denom = alpha.reshape(e, -1), alpha.sum(KEY_AXIS).reshape(e, -1)
        return {
            "negative_weight_share": (weights < 0).double().mean(1),
            "negative_denominator_share": (denom < 0).double().mean(1),
            "guarded_share": (denom.abs() < DENOMINATOR_GUARD).double().mean(1),
            "min_abs_denominator": denom.abs().amin(1).double(),
        }

    def _normalize(self, scores, log_space: bool, allowed) -> torch.Tensor:
        if log_space:
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))
            return torch.softmax(scores, dim=KEY_AXIS)
        if allowed is not None:
            scores = scores * allowed
        return scores / guard_denominator(scores.sum(KEY_AXIS, keepdim=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Dense tokens ``[B, N, m]`` → predictions ``[E, B, N]``."""
        b, n, m = x.shape
        tokens, inverse = torch.unique(x.reshape(b * n, m), dim=0, return_inverse=True)
        return self.predict(tokens.to(self.dtype), inverse.reshape(b, n))

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype
