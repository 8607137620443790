"""The pairs a family uses: the block of the per-token tables its sequences read
(:mod:`.attention`'s module docstring, "Most families use a small part of the tables").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


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
