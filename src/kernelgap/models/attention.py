"""One layer of normalized attention with a query-dependent affine readout (docs/theory.md, "The models").

    α_ij = α(x_i, x_j) ≥ 0
    y_i  = Σ_j α_ij v(x_j) / Σ_j α_ij
    p_i  = Σ_h <a_h(x_i), y_{h,i}> + b(x_i)

A family has few distinct tokens, so everything is computed on them first:

* a **score table** per head and key position: ``L[x, z] = log α(x, z)``
  (log-space maps and softmax) or ``K[x, z] = α(x, z)`` (the others);
* a **value table** ``U[x, z] = <a_h(x), v_h(z)>`` (the readout collapses
  values to a scalar per query/key pair) and a bias ``b[x]``.

A prediction then needs only scalar look-ups into these ``T × T`` tables:
``p = Σ_h Σ_j w_hj U_h[q, k_j] + b[q]`` with ``w`` the normalized weights.
All parameters are stacked (``E`` members) so K models train as one program.

Most families use a small part of the ``T × T`` tables: only the scored query
tokens as rows, and, besides each query's own entry, only the tokens that
appear with them as columns.  :func:`plan_pairs` finds that block once per
family, and :meth:`AttentionModel.predict` with the plan computes the tables on
the block (``R × C`` plus an ``R``-long diagonal of self pairs) by the same
matrix products; the dense tables stay as the reference path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import torch
from pydantic import ConfigDict, Field, model_validator
from torch import nn

from ..errors import KernelgapError
from ..validation import Config, FinitePositive, PositiveInt, invalid, one_of
from .external import ModuleModel, ModuleSpec, build_external
from .feature_maps import FEATURE_MAPS, FeatureMap, feature_map_class, vocabulary_ids
from .stacked import StackedLinear, StackedMLP, StackedTable, init_members

#: Denominators with |Σ α| below this are guarded (signed kernels; all-zero relu rows).
DENOMINATOR_GUARD = 1e-6
#: Axis of the key positions in gathered scores ``[E, H, N, S, Q]``.
KEY_AXIS = 2
#: Value/readout shapes: affine maps of the token, or two-layer MLPs.
READOUTS = ("linear", "mlp")
#: Model kinds: kernel attention, dense softmax, a module written elsewhere.
KINDS = ("kernel", "softmax", "module")


@dataclass
class Tables:
    """Per-token tables of a stacked model.

    ``scores [E, H, P, T, T]`` are log-weights when ``log_space`` else weights;
    ``values [E, H, P, T, T]`` are ``<a_h(x), v_h^(p)(z)>``; ``bias [E, T]``.
    """

    scores: torch.Tensor
    values: torch.Tensor
    bias: torch.Tensor
    log_space: bool


class Scorer(nn.Module):
    """Produces the score table ``[E, H, P, T, T]``, or its block (:meth:`block_scores`).

    ``tokens [T, m]`` are token vectors; ``ids [T]``, where given, their rows in the
    model's vocabulary (the family's distinct tokens), which scorers that index a
    table by token read instead (:meth:`token_ids` finds them from the vectors).
    """

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
        """Scores of ``rows × cols`` ``[E, H, P, R, C]`` and of each row with itself ``[E, H, P, R]``
        (features only for the tokens that need them)."""
        q = self.query_features(plan.row_tokens, plan.row_ids)
        k = self.key_features(plan.key_tokens, plan.key_ids)
        return (
            self.combine(q, k.index_select(-2, plan.cols_in_keys)),
            self.combine_diagonal(q, k.index_select(-2, plan.rows_in_keys)),
        )


class KernelScorer(Scorer):
    """``α(x, z) = <φ_Q(x), φ_K(z)>`` with ``φ_Q = φ(u_Q)``, ``φ_K^(p) = φ(u_K^(p))`` for a
    registered feature map ``φ`` (docs/theory.md, "The models").

    The scorer owns the stacked projections that give the map its input, sized by the
    map's class facts (:mod:`.feature_maps`): ``q_proj`` ``[E·H]`` slots and ``k_proj``
    ``[E·H·P]`` (one per key position), linear layers ``u = Wx + c`` of width
    ``projection_dim(r, m)`` or MLPs ``u = MLP(x)`` of width r; for table maps
    ``q_table``/``k_table``, a free row ``θ[id]`` per token of ``vocabulary``, indexed
    by token id.  ``rank_mask [E, r]`` switches features off per member, so members of
    different ranks share one stack (a masked feature is a rank reduction).
    For a map in log space, ``temperature`` τ divides the log-features
    (``φ = exp(f/τ)``): the same family of kernels, with attention nearer to
    uniform at the start and a scorer τ times slower under Adam (maps in linear
    space are invariant to it: normalized attention ignores a per-query scale).
    """

    def __init__(
        self,
        feature_map: FeatureMap,
        members: int,
        ranks: list[int],
        m: int,
        heads: int = 1,
        key_positions: int = 1,
        hidden: int = 64,
        init_scale: float = 1.0,
        vocabulary: np.ndarray | None = None,
        temperature: float = 1.0,
    ) -> None:
        super().__init__()
        cls = type(feature_map)
        if min(ranks) < 1:
            raise KernelgapError(f"rank must be ≥ 1, got {min(ranks)}")
        rank = max(ranks)
        slots, self.key_positions = members * heads, key_positions
        self.members, self.heads = members, heads
        self.temperature = temperature if cls.log_space else 1.0
        self.log_space, self.nonnegative = cls.log_space, cls.nonnegative
        self.features = cls.output_size(rank)
        self.tabled = cls.projection == "table"
        self.register_buffer("vocabulary", None)  # [V, m] bits of the tokens a table indexes by id
        # The projections are registered before the map: members draw their initialisation in this order.
        if self.tabled:
            if vocabulary is None:
                raise KernelgapError(f"the {cls.name!r} feature map needs a vocabulary (the family's tokens)")
            vocab = np.ascontiguousarray(vocabulary, dtype=np.uint8)
            self.vocabulary = torch.from_numpy(vocab.copy())
            scale = init_scale * cls.table_init_scale
            self.q_table = StackedTable(slots, len(vocab), rank, heads, scale, cls.exp_init)
            self.k_table = StackedTable(
                slots * key_positions, len(vocab), rank, heads * key_positions, scale, cls.exp_init
            )
        elif cls.projection == "mlp":
            self.q_proj = StackedMLP(slots, m, hidden, rank, heads, feature_out=True, init_scale=init_scale)
            self.k_proj = StackedMLP(
                slots * key_positions, m, hidden, rank, heads * key_positions, feature_out=True, init_scale=init_scale
            )
        else:
            d, feat = cls.projection_dim(rank, m), cls.projection_is_feature_axis
            self.q_proj = StackedLinear(slots, m, d, heads, feature_out=feat, init_scale=init_scale)
            self.k_proj = StackedLinear(
                slots * key_positions, m, d, heads * key_positions, feature_out=feat, init_scale=init_scale
            )
        self.feature_map = feature_map
        mask = torch.zeros(members, self.features)
        for e, r in enumerate(ranks):
            mask[e, : cls.output_size(r)] = 1
        if not cls.maskable and not bool(mask.all()):
            raise KernelgapError(f"feature map {cls.name!r} cannot stack different ranks")
        self.register_buffer("rank_mask", mask)

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

    #: Where the parameters of a checkpoint written before the projections moved into the
    #: scorer lie now (old prefix under the scorer → new prefix).
    MOVED = {
        "feature_map.q_proj.": "q_proj.",
        "feature_map.k_proj.": "k_proj.",
        "feature_map.q_mlp.": "q_proj.",
        "feature_map.k_mlp.": "k_proj.",
        "feature_map.q_table.": "q_table.",
        "feature_map.k_table.": "k_table.",
        "feature_map.vocabulary": "vocabulary",
    }

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for key in [k for k in state_dict if k.startswith(prefix + "feature_map.")]:
            rest = key[len(prefix) :]
            for old, new in self.MOVED.items():
                if rest.startswith(old):
                    state_dict[prefix + new + rest[len(old) :]] = state_dict.pop(key)
                    break
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def log_kernel(log_q: torch.Tensor, log_k: torch.Tensor) -> torch.Tensor:
    """``log Σ_r exp(log_q[x, r] + log_k[z, r])`` by a max-shifted matmul.

    Each side is shifted by its own row maximum, so the matmul sees numbers in
    ``[0, 1]``; products below the smallest normal float are clamped (they are
    negligible against the row's leading term).
    """
    qmax = log_q.amax(-1, keepdim=True).detach()
    kmax = log_k.amax(-1, keepdim=True).detach()
    prod = torch.exp(log_q - qmax) @ torch.exp(log_k - kmax).transpose(-1, -2)
    tiny = torch.finfo(prod.dtype).tiny
    floor = math.sqrt(tiny)  # a product below it may have lost its value to underflow
    on_cpu = log_q.device.type == "cpu"
    if on_cpu and (prod.numel() == 0 or bool(prod.detach().amin() >= floor)):
        return torch.log(prod) + qmax + kmax.transpose(-1, -2)  # no pair underflows (the usual case)
    out = torch.log(prod.clamp_min(tiny)) + qmax + kmax.transpose(-1, -2)
    # Pairs whose leading features sit at different r can underflow the shifted
    # product (large init scales): there the value is wrong and the backward of
    # log (grad / prod) overflows to inf, then NaN.  Those pairs are recomputed
    # and ``where`` sends them no gradient through the matmul path.
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


class Readout(nn.Module):
    """Values ``v_h^(p)(z) ∈ R^{d_v}``, readout vectors ``a_h(x)`` and bias ``b(x)``.

    ``kind='linear'``: affine maps of the token (the shape of the exact
    constructions); ``kind='mlp'``: two-layer MLPs.
    """

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


@dataclass
class PairPlan:
    """The part of the tables a family uses (module docstring).

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


def guard_denominator(denom: torch.Tensor) -> torch.Tensor:
    """``denom`` with every ``|Σα| <`` :data:`DENOMINATOR_GUARD` replaced by ``±guard`` (its sign kept)."""
    small = denom.abs() < DENOMINATOR_GUARD
    sign = torch.where(denom < 0, -1.0, 1.0).to(denom.dtype)
    return torch.where(small, sign * DENOMINATOR_GUARD, denom)


def gather_pairs(table: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``table [E, H, …]`` read at flat ids into its trailing axes, ``flat [...]`` → ``[E, H, ...]``.

    ``index_select`` along axis 1 of the ``[E·H, L]`` view (backward:
    ``index_add``) is several times faster on CPU than advanced indexing
    (backward: a sorting ``index_put``), and some twenty times faster than along
    the last axis of a 3-d view.
    """
    e, h = table.shape[:2]
    picked = table.reshape(e * h, -1).index_select(1, flat.reshape(-1))
    return picked.reshape(e, h, *flat.shape)


class AttentionModel(nn.Module):
    """A stack of ``E`` single-layer attention models (kernel or dense softmax).

    ``predict(tokens, index)`` scores sequences given as rows ``index`` of the distinct
    token vectors ``tokens``; ``forward`` takes dense tokens ``[B, N, m]``.  A table map
    indexes its parameters by the tokens' ids in the model's :attr:`vocabulary`: pass
    them as ``ids`` (:meth:`token_ids` finds them once), or they are found on each call.  With ``causal=True`` position ``i``
    attends to positions ``1..i`` only (the causal final query scores ``N``).
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
        """Rows of ``tokens [T, m]`` in :attr:`vocabulary` (None where the scorer reads the
        vectors); a token outside it is a one-line :class:`KernelgapError`."""
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
        ``plan`` (:meth:`plan`) only the block of pairs the sequences use is computed;
        ``ids``: the tokens' vocabulary ids (:meth:`token_ids`)."""
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
        """The pair block of sequences ``index [S, N]`` for this model (see :func:`plan_pairs`),
        bound to the tokens and their ids (``ids``, or found here)."""
        n = index.shape[1]
        p_count = n if self.position_dependent else 1
        return plan_pairs(index, list(range(n)) if positions is None else positions, p_count, self.causal).bind(
            tokens, self.token_ids(tokens) if ids is None else ids
        )

    def _predict_planned(self, plan: PairPlan) -> torch.Tensor:
        block, diag = self.scorer.block_scores(plan)
        v_block, v_diag, bias = self.readout.block_tables(plan)
        e, h = block.shape[:2]
        # joined as [E·H, L] (a 2-d cat is several times faster on CPU than along a 3-d view's last axis)
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
        key_pos = (
            torch.arange(n, device=index.device)
            if p_count > 1
            else torch.zeros(n, dtype=torch.long, device=index.device)
        )
        qpos = torch.tensor(positions, device=index.device)
        q_ids = index[:, qpos]  # [S, Q]
        # Key axis first ([N, S, Q]): the normalisation then reduces over a strided
        # axis of length N, which is several times faster on CPU than a
        # softmax over a contiguous innermost axis of length 3.
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
        """How a kernel's signs are used on sequences ``index``, per member ``[E]`` (docs/theory.md, "The models").

        Over every scored query of every head: the share of weights
        ``α(x_i, x_j) < 0``, of denominators ``Σ_j α(x_i, x_j) < 0``, of
        denominators the guard replaced (``|Σ_j α| <`` :data:`DENOMINATOR_GUARD`),
        and the smallest ``|Σ_j α|``.  Nonnegative kernels give ``0, 0, ·, > 0``.
        """
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


Kind = one_of(KINDS)
ReadoutName = one_of(READOUTS, " must be 'mlp' or 'linear', got {shown}")


class ModelSpec(Config):
    """What a model is, independent of its seed (one row of a sweep grid).

    Its fields are checked when it is made (ranges and choices; a kernel's feature map is a
    registered one; ``module`` is given exactly for ``kind = "module"``); :meth:`validate`
    adds the rank and memory limits, which need the family's sizes."""

    model_config = ConfigDict(frozen=True)
    WHERE: ClassVar[str] = "model"

    kind: Kind = Field("kernel", description="kernel attention, dense softmax, or a module written elsewhere")
    feature_map: str = Field("mlp_exp", description="a registered feature map (kind = kernel)")
    rank: PositiveInt = Field(16, description="features per head (kernel), or the module's rank")
    heads: PositiveInt = Field(1, description="attention heads")
    d_value: PositiveInt = Field(32, description="value width")
    readout: ReadoutName = Field("mlp", description="value/readout maps: two-layer MLPs or affine")
    hidden: PositiveInt = Field(64, description="hidden width of the MLPs")
    position_dependent: bool = Field(False, description="a key map per key position")
    causal: bool = Field(False, description="position i attends to positions 1..i")
    score_dim: PositiveInt | None = Field(None, description="softmax d (default m)")
    temperature: FinitePositive = Field(1.0, description="score temperature τ (a sweep's softmax model: 4.0)")
    #: Softmax only: divide scores by ``τ·√d`` instead of ``τ`` (scaled dot-product
    #: attention; the trained softmax recipe, see ``training.config.default_model``).
    scaled_scores: bool = Field(False, description="softmax: divide scores by τ·√d instead of τ")
    init_scale: FinitePositive = Field(1.0, description="initial scale of the parameters")
    #: ``kind = "module"``: which module, with which arguments (:mod:`.external`).
    module: ModuleSpec | None = Field(None, description="kind = module: which module, with which arguments")

    @model_validator(mode="after")
    def _kind(self) -> ModelSpec:
        if (self.kind == "module") != (self.module is not None):
            raise invalid(" is given exactly when {where}.kind = 'module'", path="module")
        if self.kind == "kernel":
            try:
                feature_map_class(self.feature_map)
            except KernelgapError as exc:
                raise invalid(f": {exc}", path="feature_map") from None
        return self

    def identity(self) -> dict:
        """The fields its kind's model is built from (:func:`model_identity`)."""
        return model_identity(self.model_dump())

    def validate(
        self, where: str = "model", *, m: int | None = None, tokens: int | None = None, members: int = 1
    ) -> ModelSpec:
        """The limits of :mod:`kernelgap.limits` (its fields were checked when it was made).

        The rank is at most :data:`kernelgap.limits.MAX_RANK`, and the parameters, counted
        at 4 bytes each (float32), must fit the memory limit of :mod:`kernelgap.limits`.
        With ``linear(i, o) = i·o + o``, ``mlp(i, h, o) = linear(i, h) + linear(h, o)``,
        ``H`` heads and ``P = 1`` key position, a member has a readout of
        ``(2H)·f(d_value) + f(1)`` (``f`` the linear or MLP map of the token) and a scorer of
        ``2H·T·r`` (table maps over ``T`` tokens), ``2H·mlp(m, hidden, r)`` (MLP maps),
        ``2H·linear(m, d)`` (projected maps, ``d`` their projection width; ``favor`` adds its
        ``H·m·r`` fixed projections) or ``2H·linear(m, score_dim)`` (softmax).  Without the
        family's ``m`` and number of distinct ``tokens`` both count as 1, so the estimate
        is a floor: a refused spec could never be built.
        """
        from ..limits import check_memory, check_rank
        from .feature_maps import Favor, MLPFeatureMap, ProjectedFeatureMap, Table

        check_rank(self.rank, f"{where}.rank")
        if self.kind == "module":
            return self
        m, v, h, r = max(m or 1, 1), max(tokens or 1, 1), self.heads, self.rank

        def linear(i: int, o: int) -> int:
            return i * o + o

        def mlp(i: int, o: int) -> int:
            return linear(i, self.hidden) + linear(self.hidden, o)

        token_map = linear if self.readout == "linear" else mlp
        params = 2 * h * token_map(m, self.d_value) + token_map(m, 1)
        if self.kind == "softmax":
            params += 2 * h * linear(m, self.score_dim or m)
        else:
            cls = feature_map_class(self.feature_map)
            if issubclass(cls, Table):
                params += 2 * h * v * r
            elif issubclass(cls, MLPFeatureMap):
                params += 2 * h * mlp(m, r)
            elif issubclass(cls, ProjectedFeatureMap):
                params += 2 * h * linear(m, cls.projection_dim(r, m)) + (h * m * r if issubclass(cls, Favor) else 0)
        params *= max(members, 1)
        check_memory(f"{where} with at least {params:,} parameters (4 bytes each)", 4 * params)
        return self


#: The :class:`ModelSpec` fields each kind of model is built from (:func:`build_model`); a
#: run id hashes only these, so equal models have one id whatever the other fields say.
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "kernel": (
        "kind",
        "feature_map",
        "rank",
        "heads",
        "d_value",
        "readout",
        "hidden",
        "position_dependent",
        "causal",
        "temperature",
        "init_scale",
    ),
    "softmax": (
        "kind",
        "heads",
        "d_value",
        "readout",
        "hidden",
        "position_dependent",
        "causal",
        "score_dim",
        "temperature",
        "scaled_scores",
        "init_scale",
    ),
    "module": ("kind", "rank", "module"),
}
#: Fields a kind does not use that a sweep file may still set: a softmax variant's
#: ``model.rank = 1`` (the older way to give softmax runs one rank; the run id ignores it).
#: Any other unused field set to a value of its own is refused (``training.RunConfig``).
KIND_TOLERATES: dict[str, tuple[str, ...]] = {"softmax": ("rank",)}


def model_identity(model: dict) -> dict:
    """The fields of a spec (as a dict) that its kind's model is built from; a kernel map in
    linear space ignores ``temperature`` (normalized attention is invariant to it)."""
    keep = KIND_FIELDS.get(model.get("kind"), tuple(model))
    if (
        model.get("kind") == "kernel"
        and model.get("feature_map") in FEATURE_MAPS
        and not feature_map_class(model["feature_map"]).log_space
    ):
        keep = tuple(k for k in keep if k != "temperature")
    return {k: model[k] for k in keep if k in model}


def build_model(
    spec: ModelSpec,
    m: int,
    length: int,
    seeds: list[int],
    ranks: list[int] | None = None,
    vocabulary: np.ndarray | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> AttentionModel | ModuleModel:
    """A stack of ``len(seeds)`` models of one spec; ``ranks`` pads to the largest.
    A module (``kind = "module"``) trains alone: one seed, one rank."""
    spec.validate()
    if spec.kind == "module":
        if len(seeds) != 1:
            raise KernelgapError("a module model trains alone (one seed per stack)")
        return build_external(spec.module, m, (ranks or [spec.rank])[0], seeds[0], dtype, device)
    members = len(seeds)
    ranks = ranks or [spec.rank] * members
    key_positions = length if spec.position_dependent else 1
    if spec.kind == "kernel":
        fm_cls = feature_map_class(spec.feature_map)
        fm = fm_cls.build(m, max(ranks), members * spec.heads, spec.heads)
        scorer: Scorer = KernelScorer(
            fm, members, ranks, m, spec.heads, key_positions, spec.hidden, spec.init_scale, vocabulary, spec.temperature
        )
    else:
        d = spec.score_dim or m
        tau = spec.temperature * (math.sqrt(d) if spec.scaled_scores else 1.0)
        scorer = SoftmaxScorer(m, d, members, spec.heads, key_positions, tau, spec.init_scale)
    readout = Readout(m, spec.d_value, members, spec.heads, key_positions, spec.readout, spec.hidden, spec.init_scale)
    model = AttentionModel(scorer, readout, spec.causal, spec.position_dependent)
    init_members(model, seeds, ranks)
    return model.to(device=device, dtype=dtype)


def feature_count(spec: ModelSpec) -> int | None:
    """Total kernel features ``H · r`` actually used (None for dense softmax; a module's rank)."""
    if spec.kind == "softmax":
        return None
    if spec.kind == "module":
        return spec.rank
    return spec.heads * feature_map_class(spec.feature_map).output_size(spec.rank)


def signed_kernel(spec: ModelSpec) -> bool:
    """Whether the spec's kernel may take negative values (softmax weights never do)."""
    return spec.kind == "kernel" and not feature_map_class(spec.feature_map).nonnegative
