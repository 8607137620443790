"""A training recipe sized by its family (docs/experiments.md, "A recipe sized by its family").

A map's calibrated recipe is one setting for every family; :func:`sized_fields` fills what
the family decides into the fields a run leaves unset (a run read back from a record has
every field set, so sizing never runs twice), and the record keeps it (``recipe``):

- **Value width**: a linear readout must reproduce the overlaps ``<x, c>`` on the family's
  pairs, a bilinear form of the overlap matrix's rank: ``d_value = max(default, rank O)``.
- **Kernel slope**: a target at level ``k`` beats a bad candidate at ``k + d`` only where
  ``a(k)/a(k + d) > 2d − 1``; a log-space map on a family whose *span* (the largest
  ``Σ log(2d_i − 1)`` over a query's level gaps) exceeds :data:`STEEP_SPAN` trains at
  :data:`STEEP_TEMPERATURE` for :data:`STEEP_STEPS` times the steps.
- **Batches**: a product family trained in batches takes ``√(batches per epoch)`` times the steps.
- **Hidden width of a distilled MLP map**: ``max(default, HIDDEN_PER_TOKEN · tokens)``, to
  interpolate its teacher's feature vectors.
- **Power at length N > 3**: the power mean of ``S`` errors is within ``S^(1/p)`` of their
  maximum, so ``p = max(8, round(POWER_PER_LOG · ln S))``.
- **Pruned at length N > 3**: one head of position-free features, at most one per query (each
  query must own one at the certificate), starts from the map's ``recipe_prune_from`` times
  its rank and is cut (:mod:`.prune`).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from ..task.constructions import candidate_tokens, query_tokens
from ..task.family import MAX_EXPANDED, AnyFamily, ProductFamily
from .two_candidate import firsts_per_step, reducible_spec, two_candidate_count

#: Span (log kernel ratio) above which a family is *steep*: held-out families of length 3
#: have S ≤ 3.43; the ladders m = 48 (S = 4.32) and m = 64 (S = 6.54) train only at τ = 1/2.
STEEP_SPAN = 4.0
STEEP_TEMPERATURE = 0.5
STEEP_STEPS = 2
#: Calibrated on constant-weight m = 120, n = 36 (72 tokens): 72 units fit 2 of 4 seeds, 144 all.
HIDDEN_PER_TOKEN = 2
#: Calibrated on the layer family m = 10, N = 7 (S = 17,576: p = 20).
POWER_PER_LOG = 2.0


@dataclass(frozen=True)
class FamilyShape:
    """What sizes the recipe (module docstring); ``sequences``: what one step scores."""

    overlap_rank: int
    span: float
    length: int
    queries: int
    tokens: int
    batches: int = 1  # steps per epoch of a product family trained in its two-candidate form
    sequences: int = 0

    def power(self, calibrated: float) -> float:
        """The power-mean power the family needs, at least the ``calibrated`` one."""
        if self.length <= 3 or self.sequences < 2:
            return calibrated
        return float(max(calibrated, round(POWER_PER_LOG * math.log(self.sequences))))

    def prune_from(self, model, wide: float) -> float:
        """``wide`` for one position-free head at N > 3 with no more features than the family
        has queries (module docstring), else 1 (off)."""
        one_head = model.heads == 1 and not model.position_dependent
        return wide if self.length > 3 and one_head and model.rank <= self.queries else 1.0

    @property
    def steep(self) -> bool:
        return self.span > STEEP_SPAN

    def as_dict(self) -> dict:
        return {**asdict(self), "span": round(self.span, 4), "steep": self.steep}


#: Query rows scored at a time by :func:`level_span` (bounds its memory).
SPAN_BLOCK = 1024


def level_span(overlaps: np.ndarray) -> float:
    """``max_x Σ log(2d − 1)`` over the gaps ``d`` between consecutive distinct values of each
    row of ``overlaps`` (a query's levels); 0 for a row of one level or of unit gaps."""
    if overlaps.size == 0:
        return 0.0
    gaps = np.diff(np.sort(overlaps, axis=1), axis=1)
    ratios = np.maximum(2 * gaps - 1, 1).astype(np.float64)
    return float(np.log(ratios).sum(axis=1).max())


def overlap_rank(queries: np.ndarray, attended: np.ndarray) -> int:
    """The rank of ``queries @ attended.T`` (0/1 rows) without forming it: with ``B`` an
    orthonormal basis of the attended rows' span, ``rank(Q Aᵀ) = rank(Q B)`` — ``O((q + a) m²)``."""
    if len(queries) == 0 or len(attended) == 0:
        return 0
    a = attended.astype(np.float64)
    _, sv, vt = np.linalg.svd(a, full_matrices=False)
    basis = vt[sv > sv[0] * max(a.shape) * np.finfo(np.float64).eps].T
    return int(np.linalg.matrix_rank(queries.astype(np.float64) @ basis))


def family_shape(family: AnyFamily) -> FamilyShape:
    """The :class:`FamilyShape` of a family (either layout), levels over every candidate token."""
    bits = family.tokens.astype(np.int64)
    queries, candidates = query_tokens(family), candidate_tokens(family)
    attended = np.union1d(queries, candidates)
    rank = overlap_rank(bits[queries], bits[attended])
    levels = bits[candidates if len(candidates) else attended].T
    span = max(
        (level_span(bits[queries[i : i + SPAN_BLOCK]] @ levels) for i in range(0, len(queries), SPAN_BLOCK)),
        default=0.0,
    )
    return FamilyShape(
        rank, span, family.length, len(queries), len(attended), product_batches(family), step_sequences(family)
    )


def step_sequences(family: AnyFamily) -> int:
    """Sequences one step scores: a product's two-candidate sequences (a batch), else all."""
    if not isinstance(family, ProductFamily):
        return len(family)
    batch = firsts_per_step(family)
    per_first = len(family.queries) * len(family.candidates)
    return two_candidate_count(family) if batch is None else batch * per_first


def product_batches(family: AnyFamily) -> int:
    """Steps that see every two-candidate sequence once (1 unless a product trained in batches)."""
    if not isinstance(family, ProductFamily) or (family.length == 3 and family.sequence_count <= MAX_EXPANDED):
        return 1
    batch = firsts_per_step(family)
    return 1 if batch is None else -(-len(family.candidates) // batch)


@functools.lru_cache(maxsize=64)
def _shape_of(key: str, spec_type: type) -> FamilyShape:
    return family_shape(spec_type.parse(json.loads(key)).load())


def shape_of(spec) -> FamilyShape:
    """:func:`family_shape` of a FamilySpec, remembered per spec (a sweep sizes many runs)."""
    return _shape_of(json.dumps(spec.model_dump(), sort_keys=True), type(spec))


def sized_run(run):
    """``run`` with the fields it left unset sized, marked sized and carrying its ``recipe``."""
    model_update, train_update, recipe = sized_fields(run)
    model, train = run.model.model_copy(update=model_update), run.train.model_copy(update=train_update)
    out = run.model_copy(update={"model": model, "train": train})
    out._sized, out._recipe_steps, out._recipe = True, False, recipe
    return out


def sized_fields(run) -> tuple[dict, dict, dict | None]:
    """``(model updates, train updates, recipe)`` of a RunConfig: the fields it left unset,
    sized, and what the record keeps (None when nothing could be sized)."""
    model = run.model
    if model.built_elsewhere:
        return {}, {}, None
    given = model.model_fields_set
    wants_width = "d_value" not in given
    wants_slope = model.log_space and "temperature" not in given
    wants_steps = run.recipe_steps
    wants_power = "power" not in run.train.model_fields_set
    wants_hidden = run.train.distill and model.projection == "mlp" and "hidden" not in given
    wants_prune = model.recipe_prune_from > 1 and "prune_from" not in run.train.model_fields_set
    if not (wants_width or wants_slope or wants_steps or wants_power or wants_hidden or wants_prune):
        return {}, {}, None
    shape = shape_of(run.family)
    model_update, train_update = {}, {}
    if wants_width:
        model_update["d_value"] = max(type(model).model_fields["d_value"].default, shape.overlap_rank)
    if wants_hidden:
        model_update["hidden"] = max(type(model).model_fields["hidden"].default, HIDDEN_PER_TOKEN * shape.tokens)
    model_update = {k: v for k, v in model_update.items() if v != getattr(model, k)}  # what changes
    if wants_slope and shape.steep:
        model_update["temperature"] = STEEP_TEMPERATURE
    if wants_power:
        train_update["power"] = shape.power(type(run.train).model_fields["power"].default)
    if wants_prune:
        train_update["prune_from"] = shape.prune_from(model, model.recipe_prune_from)
    if wants_steps:
        batches = shape.batches if reducible_spec(model) else 1
        factor = (STEEP_STEPS if shape.steep else 1) * math.sqrt(batches)
        train_update["max_steps"] = math.ceil(run.train.max_steps * factor)
    train_update = {k: v for k, v in train_update.items() if v != getattr(run.train, k)}
    return model_update, train_update, {"family": shape.as_dict(), "sized": {**model_update, **train_update}}
