"""Stacked ("ensemble") building blocks.

Every parameter carries a leading *slot* axis so that K models of one shape
train as one tensor program.  A model with ``E`` members and ``H``
heads has ``E·H`` slots in its head-level modules and ``E`` in the others.
Each module initialises a member from that member's own generator, drawing
exactly the numbers a lone model of that member's rank would draw, so a model
trained alone and the same model trained in a stack start identically.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class StackedModule(nn.Module):
    """A module whose parameters have a leading slot axis of size ``slots``.

    ``heads`` slots belong to each member: member ``e`` owns slots
    ``e·heads … (e+1)·heads − 1``.
    """

    def __init__(self, slots: int, heads: int = 1) -> None:
        super().__init__()
        self.slots = slots
        self.heads = heads

    def member_slots(self, member: int) -> range:
        return range(member * self.heads, (member + 1) * self.heads)

    def init_member(self, member: int, gen: torch.Generator, rank: int | None) -> None:
        """Initialise the slots of one member from its generator."""
        raise NotImplementedError


def uniform_(t: torch.Tensor, bound: float, gen: torch.Generator) -> None:
    """Fill ``t`` in place with U(−bound, bound) drawn from ``gen`` (CPU draw)."""
    draw = torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1
    t.copy_((draw * bound).to(t.dtype))


def normal_(t: torch.Tensor, std: float, gen: torch.Generator) -> None:
    t.copy_((torch.randn(t.shape, generator=gen, dtype=torch.float64) * std).to(t.dtype))


class StackedLinear(StackedModule):
    """``y = x W + c`` per slot: ``W [S, in, out]``; ``x [T, in]`` or ``[S, T, in]``.

    ``feature_out=True`` marks the output axis as the feature (rank) axis: a
    member of rank r initialises only its first r output columns.
    """

    def __init__(
        self,
        slots: int,
        d_in: int,
        d_out: int,
        heads: int = 1,
        bias: bool = True,
        feature_out: bool = False,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__(slots, heads)
        self.weight = nn.Parameter(torch.zeros(slots, d_in, d_out))
        self.bias = nn.Parameter(torch.zeros(slots, 1, d_out)) if bias else None
        self.feature_out = feature_out
        self.init_scale = init_scale

    def init_member(self, member, gen, rank):
        d_in, d_out = self.weight.shape[1:]
        cols = min(rank, d_out) if (self.feature_out and rank) else d_out
        bound = self.init_scale / math.sqrt(d_in)
        with torch.no_grad():
            for s in self.member_slots(member):
                uniform_(self.weight[s, :, :cols], bound, gen)
                if self.bias is not None:
                    uniform_(self.bias[s, :, :cols], bound, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        slots, _, d_out = self.weight.shape
        if x.dim() == 2:
            x = x.expand(slots, *x.shape)
        if d_out != 1:  # the bias joins the product (no extra pass)
            return torch.bmm(x, self.weight) if self.bias is None else torch.baddbmm(self.bias, x, self.weight)
        y = (x * self.weight.transpose(1, 2)).sum(-1, keepdim=True)  # one output: a multiply-sum beats bmm on CPU
        return y if self.bias is None else y + self.bias


class StackedMLP(nn.Module):
    """Two stacked linear layers with a GELU between them."""

    def __init__(
        self,
        slots: int,
        d_in: int,
        hidden: int,
        d_out: int,
        heads: int = 1,
        feature_out: bool = False,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.inp = StackedLinear(slots, d_in, hidden, heads, init_scale=init_scale)
        self.out = StackedLinear(slots, hidden, d_out, heads, feature_out=feature_out, init_scale=init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.nn.functional.gelu(self.inp(x)))


class StackedTable(StackedModule):
    """A free row ``θ[s, id] ∈ R^width`` per slot and token id: ``θ [S, V, width]``;
    ``forward(ids [T])`` → ``[S, T, width]``.

    A member of rank r initialises its first r columns, ``N(0, (init_scale/2)²)``, or
    ``exp`` of that draw with ``exp_init``.
    """

    def __init__(
        self, slots: int, rows: int, width: int, heads: int = 1, init_scale: float = 1.0, exp_init: bool = False
    ) -> None:
        super().__init__(slots, heads)
        self.theta = nn.Parameter(torch.zeros(slots, rows, width))
        self.init_scale, self.exp_init = init_scale, exp_init

    def init_member(self, member, gen, rank):
        cols = min(rank or self.theta.shape[-1], self.theta.shape[-1])
        with torch.no_grad():
            for s in self.member_slots(member):
                normal_(self.theta[s, :, :cols], 0.5 * self.init_scale, gen)
                if self.exp_init:
                    self.theta[s, :, :cols].exp_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.theta[:, ids]


def init_members(module: nn.Module, seeds: list[int], ranks: list[int | None]) -> None:
    """Initialise member ``e`` of every stacked submodule from ``seeds[e]``.

    Modules are visited in registration order, so the draws of one member do
    not depend on how many other members share the stack.
    """
    for member, (seed, rank) in enumerate(zip(seeds, ranks)):
        gen = torch.Generator().manual_seed(int(seed))
        for sub in module.modules():
            if isinstance(sub, StackedModule):
                sub.init_member(member, gen, rank)
