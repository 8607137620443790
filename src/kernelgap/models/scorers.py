"""The scorers: ``log α(x, z)`` (log-space maps, softmax) or ``α(x, z)`` for every pair of
tokens, per member, head and key position (docs/theory.md, "The models")."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from ..errors import KernelgapError
from .feature_maps import FeatureMap, vocabulary_ids
from .stacked import StackedLinear, StackedMLP, StackedTable


@dataclass
class PairPlan:
    """The part of the tables a family uses (:mod:`.attention`'s module docstring).

    ``rows`` are the scored query tokens, ``cols`` the tokens met as keys of
    another token; ``flat [N, S, Q]`` indexes the concatenation of the block
    ``[P, R, C]`` and the self pairs ``[P, R]``, flattened; ``q_rows [S, Q]``
    is each query's row.  Query-side features are computed for the rows only,
    key-side ones for the *keys* (rows and columns): ``cols_in_keys`` and
    ``rows_in_keys`` place them there.  :meth:`bind` attaches the token vectors and,
    for a scorer that indexes tokens by id, their ids.
    """

    rows: torch.Tensor
    cols: torch.Tensor
    flat: torch.Tensor
    q_rows: torch.Tensor
    allowed: torch.Tensor | None
    cols_in_keys: torch.Tensor
    rows_in_keys: torch.Tensor
    keys: torch.Tensor
    row_tokens: torch.Tensor | None = None
    key_tokens: torch.Tensor | None = None
    row_ids: torch.Tensor | None = None
    key_ids: torch.Tensor | None = None

    def bind(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> PairPlan:
        """The plan with the vectors of its row and key tokens, and their vocabulary ids
        when ``ids [T]`` (the ids of ``tokens``) is given."""
        picked = (
            {}
            if ids is None
            else {"row_ids": ids.index_select(0, self.rows), "key_ids": ids.index_select(0, self.keys)}
        )
        return replace(
            self, row_tokens=tokens.index_select(0, self.rows), key_tokens=tokens.index_select(0, self.keys), **picked
        )

    @property
    def size(self) -> int:
        return len(self.rows) * (len(self.cols) + 1)


def plan_pairs(index: torch.Tensor, positions: list[int], key_positions: int, causal: bool) -> PairPlan:
    """The block of (query, key) pairs that sequences ``index [S, N]`` use at ``positions``."""
    n, dev = index.shape[1], index.device
    qpos = torch.tensor(positions, device=dev)
    q_ids = index[:, qpos]  # [S, Q]
    queries = q_ids[None].expand(n, *q_ids.shape)  # [N, S, Q]
    keys = index.T[:, :, None].expand_as(queries)
    own = keys == queries
    rows, row_of = torch.unique(q_ids, return_inverse=True)
    cols, col_of = torch.unique(keys[~own], return_inverse=True)
    r, c = len(rows), len(cols)
    key_pos = torch.arange(n, device=dev) if key_positions > 1 else torch.zeros(n, dtype=torch.long, device=dev)
    key_pos = key_pos[:, None, None].expand_as(queries)
    row = row_of[None].expand_as(queries)
    flat = key_positions * r * c + key_pos * r + row  # self pairs after the block
    flat = flat.masked_scatter(~own, ((key_pos * r + row) * c)[~own] + col_of)
    allowed = None
    if causal:
        allowed = (torch.arange(n, device=dev)[:, None] <= qpos[None, :])[:, None, :]  # [N, 1, Q]
    keys, key_of = torch.unique(torch.cat([rows, cols]), return_inverse=True)
    return PairPlan(rows, cols, flat, row_of, allowed, key_of[r:], key_of[:r], keys)


class Scorer(nn.Module):
    """Produces the score table ``[E, H, P, T, T]``, or its block (:meth:`block_scores`), of
    token vectors ``tokens [T, m]``; ``ids [T]``: their rows in the vocabulary of a scorer
    that indexes a table by token."""

    log_space: bool = True
    nonnegative: bool = True

    def token_ids(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """Rows of ``tokens`` in the scorer's ``vocabulary`` (None for a scorer that needs none)."""
        return None

    def query_features(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Query features ``[E, H, 1, T, r]``."""
        raise NotImplementedError

    def key_features(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Key features ``[E, H, P, T, r]``."""
        raise NotImplementedError

    def combine(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Scores of every query row against every key row: ``[…, R, r] × […, C, r] → […, R, C]``."""
        raise NotImplementedError

    def combine_diagonal(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Scores of row i against key row i: ``[…, R, r] × […, R, r] → […, R]``."""
        raise NotImplementedError

    def scores(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        if ids is None:
            ids = self.token_ids(tokens)
        return self.combine(self.query_features(tokens, ids), self.key_features(tokens, ids))

    def block_scores(self, plan: PairPlan):
        """Scores of ``rows × cols`` ``[E, H, P, R, C]`` and of each row with itself ``[E, H, P, R]``."""
        q = self.query_features(plan.row_tokens, plan.row_ids)
        k = self.key_features(plan.key_tokens, plan.key_ids)
        return (
            self.combine(q, k.index_select(-2, plan.cols_in_keys)),
            self.combine_diagonal(q, k.index_select(-2, plan.rows_in_keys)),
        )


class KernelScorer(Scorer):
    """``α(x, z) = <φ_Q(x), φ_K(z)>`` with ``φ_Q = φ(u_Q)``, ``φ_K^(p) = φ(u_K^(p))`` for a
    registered feature map ``φ``; ``u`` a stacked projection sized by the map's facts, or for
    a table map a free row per vocabulary token.  ``rank_mask [E, r]`` switches features off
    per member, so members of different ranks share one stack.  For a map in log space, τ
    divides the log-features: the same kernels, with attention nearer to uniform at the start
    and a scorer τ times slower under Adam (linear-space maps are invariant to it).
    """

    def __init__(
        self,
        *,
        feature_map: FeatureMap,
        ranks: list[int],
        m: int,
        heads: int = 1,
        key_positions: int = 1,
        hidden: int = 64,
        init_scale: float = 1.0,
        vocabulary: torch.Tensor | np.ndarray | None = None,
        temperature: float = 1.0,
    ) -> None:
        """Keyword-only (a stacked scorer is sized by all nine): one rank per member, a table
        map's ``vocabulary [V, m]`` (uint8 bits)."""
        super().__init__()
        cls = type(feature_map)
        if min(ranks) < 1:
            raise KernelgapError(f"rank must be ≥ 1, got {min(ranks)}")
        rank, members = max(ranks), len(ranks)
        slots, self.key_positions = members * heads, key_positions
        self.members, self.heads = members, heads
        self.temperature = temperature if cls.log_space else 1.0
        self.log_space, self.nonnegative = cls.log_space, cls.nonnegative
        self.features = cls.output_size(rank)
        self.tabled = cls.projection is None
        self.register_buffer("vocabulary", None)  # [V, m] bits of the tokens a table indexes by id
        # The projections are registered before the map: members draw their initialisation in this order.
        if self.tabled:
            if vocabulary is None:
                raise KernelgapError(f"the {cls.name!r} feature map needs a vocabulary (the family's tokens)")
            if isinstance(vocabulary, np.ndarray):
                vocabulary = torch.from_numpy(np.ascontiguousarray(vocabulary, dtype=np.uint8).copy())
            self.vocabulary = vocabulary
            self._tables(cls, slots, len(vocabulary), rank, init_scale)
        else:
            self._projections(cls, slots, m, rank, hidden, init_scale)
        self.feature_map = feature_map
        if not cls.maskable and len({cls.output_size(r) for r in ranks}) > 1:
            raise KernelgapError(f"feature map {cls.name!r} cannot stack different ranks")
        mask = torch.zeros(members, self.features)
        for e, r in enumerate(ranks):
            mask[e, : cls.output_size(r)] = 1
        self.register_buffer("rank_mask", mask)

    def _tables(self, cls: type[FeatureMap], slots: int, rows: int, rank: int, init_scale: float) -> None:
        """``q_table``/``k_table``: a free row per vocabulary token, slot and key position."""
        heads, p = self.heads, self.key_positions
        scale = init_scale * cls.table_init_scale
        self.q_table = StackedTable(slots, rows, rank, heads, scale, cls.exp_init)
        self.k_table = StackedTable(slots * p, rows, rank, heads * p, scale, cls.exp_init)

    def _projections(self, cls: type[FeatureMap], slots: int, m: int, rank: int, hidden: int, init_scale: float):
        """``q_proj``/``k_proj``: MLPs of width r, or linear maps of the map's projection width."""
        heads, p = self.heads, self.key_positions
        if cls.projection == "mlp":
            self.q_proj = StackedMLP(slots, m, hidden, rank, heads, feature_out=True, init_scale=init_scale)
            self.k_proj = StackedMLP(slots * p, m, hidden, rank, heads * p, feature_out=True, init_scale=init_scale)
            return
        d, feat = cls.projection_dim(rank, m), cls.projection_is_feature_axis
        self.q_proj = StackedLinear(slots, m, d, heads, feature_out=feat, init_scale=init_scale)
        self.k_proj = StackedLinear(slots * p, m, d, heads * p, feature_out=feat, init_scale=init_scale)

    def token_ids(self, tokens):
        if not self.tabled:
            return None
        return vocabulary_ids(self.vocabulary, tokens, self.feature_map.name)

    def query(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """``φ_Q`` of every slot, ``[E·H, T, r]`` (log-features for a map in log space)."""
        if self.tabled:
            return self.feature_map.phi(self.q_table(self.token_ids(tokens) if ids is None else ids))
        return self.feature_map.phi(self.q_proj(tokens))

    def key(self, tokens: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """``φ_K`` of every slot and key position, ``[E·H, P, T, r]``."""
        if self.tabled:
            u = self.k_table(self.token_ids(tokens) if ids is None else ids)
        else:
            u = self.k_proj(tokens)
        return self.feature_map.phi(u.reshape(self.members * self.heads, self.key_positions, *u.shape[1:]))

    def query_features(self, tokens, ids=None):
        q = self.query(tokens, ids)  # [E·H, T, r]
        if self.temperature != 1.0:
            q = q / self.temperature
        q = q.reshape(self.members, self.heads, 1, tokens.shape[0], q.shape[-1])
        mask = self.rank_mask[:, None, None, None, :]
        if self.log_space:  # a masked feature has log-weight −∞ (as good as a smaller rank)
            return torch.where(mask > 0, q, torch.full_like(q, torch.finfo(q.dtype).min))
        return q * mask

    def key_features(self, tokens, ids=None):
        k = self.key(tokens, ids)  # [E·H, P, T, r]
        if self.temperature != 1.0:
            k = k / self.temperature
        return k.reshape(self.members, self.heads, self.key_positions, tokens.shape[0], k.shape[-1])

    def combine(self, q, k):
        return log_kernel(q, k) if self.log_space else q @ k.transpose(-1, -2)

    def combine_diagonal(self, q, k):
        return torch.logsumexp(q + k, dim=-1) if self.log_space else (q * k).sum(-1)


def log_kernel(log_q: torch.Tensor, log_k: torch.Tensor) -> torch.Tensor:
    """``log Σ_r exp(log_q[x, r] + log_k[z, r])`` by a matmul of each side shifted by its row
    maximum (numbers in ``[0, 1]``)."""
    qmax = log_q.amax(-1, keepdim=True).detach()
    kmax = log_k.amax(-1, keepdim=True).detach()
    prod = torch.exp(log_q - qmax) @ torch.exp(log_k - kmax).transpose(-1, -2)
    tiny = torch.finfo(prod.dtype).tiny
    floor = math.sqrt(tiny)  # a product below it may have lost its value to underflow
    on_cpu = log_q.device.type == "cpu"
    if on_cpu and (prod.numel() == 0 or bool(prod.detach().amin() >= floor)):
        return torch.log(prod) + qmax + kmax.transpose(-1, -2)  # no pair underflows (the usual case)
    out = torch.log(prod.clamp_min(tiny)) + qmax + kmax.transpose(-1, -2)
    # Pairs whose leading features sit at different r can underflow the shifted product: the
    # value is wrong and log's backward overflows.  Those pairs are recomputed.
    under = (prod < floor).detach()
    if not on_cpu:  # no host synchronisation: the product again in float64
        wide = torch.exp((log_q - qmax).double()) @ torch.exp((log_k - kmax).double()).transpose(-1, -2)
        wide = torch.log(wide.clamp_min(torch.finfo(torch.float64).tiny)).to(out.dtype)
        return torch.where(under, wide + qmax + kmax.transpose(-1, -2), out)
    if bool(under.any()):  # exactly, as a logsumexp over r, at the few pairs that need it
        shape = torch.broadcast_shapes(log_q.shape[:-2], log_k.shape[:-2])
        lq = log_q.expand(*shape, *log_q.shape[-2:])
        lk = log_k.expand(*shape, *log_k.shape[-2:])
        idx = under.nonzero(as_tuple=True)
        exact = torch.logsumexp(lq[idx[:-1]] + lk[(*idx[:-2], idx[-1])], dim=-1)
        out = out.index_put(idx, exact)
    return out


class SoftmaxScorer(Scorer):
    """Dense softmax: ``log α(x, z) = <q(x), k^(p)(z)> / τ`` with ``q, k ∈ R^d``."""

    def __init__(
        self,
        m: int,
        d: int,
        members: int,
        heads: int = 1,
        key_positions: int = 1,
        temperature: float = 1.0,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.members, self.heads, self.key_positions, self.temperature = members, heads, key_positions, temperature
        self.q = StackedLinear(members * heads, m, d, heads, init_scale=init_scale)
        self.k = StackedLinear(members * heads * key_positions, m, d, heads * key_positions, init_scale=init_scale)

    def query_features(self, tokens, ids=None):
        return self.q(tokens).reshape(self.members, self.heads, 1, tokens.shape[0], -1)

    def key_features(self, tokens, ids=None):
        return self.k(tokens).reshape(self.members, self.heads, self.key_positions, tokens.shape[0], -1)

    def combine(self, q, k):
        return q @ k.transpose(-1, -2) / self.temperature

    def combine_diagonal(self, q, k):
        return (q * k).sum(-1) / self.temperature
