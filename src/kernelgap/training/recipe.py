"""A training recipe sized by its family (docs/experiments.md, "A recipe sized by its family").

A map's calibrated recipe (its ``default_lr``, ``recipe_model``, ``recipe_schedule``) is one
setting for every family.  Three facts of the family decide what the recipe must adapt, and
:func:`sized_fields` fills them into a run's fields that the run leaves unset (a run that sets
a field keeps it; a run read back from a record has every field set, so sizing never runs twice):

- **Value width.**  On a sequence ``(x; c, c)`` attention splits between ``c`` and ``x`` only,
  so a linear readout ``U[x, c] = <a(x), v(c)> + b(x)`` must reproduce the overlap ``<x, c>``
  on the family's pairs: a bilinear form whose rank is that of the overlap matrix ``O`` of the
  query tokens against every token they attend to.  ``d_value = max(default, rank O)``.
- **Kernel slope.**  A query with its target candidate at level ``k`` and a bad one at level
  ``k + d`` is within 1/2 on their pair sequences only where the kernel falls as
  ``a(k)/a(k + d) > 2d − 1``.  The *span* ``S`` of a family is the largest, over its queries,
  of ``Σ log(2d_i − 1)`` over the gaps ``d_i`` between consecutive levels of the query's
  candidates (the log-kernel range the pairs demand).  A log-space map whose family has ``S``
  above :data:`STEEP_SPAN` divides its log-features by :data:`STEEP_TEMPERATURE` (Adam then
  moves the kernel twice as fast) and trains :data:`STEEP_STEPS` times as many steps.  At
  length N a bad level needs ``(N − 2)`` times the ratio, but halving τ does not help there
  (measured on the layer family; docs), so the span is the pairs' alone.
- **Batches.**  A product family too large for a full-batch step trains on batches of
  first-slot candidates (:func:`kernelgap.training.two_candidate.firsts_per_step`); its schedule has
  ``√(batches per epoch)`` times as many steps.
- **Hidden width of a distilled map.**  A run distilled from a table (:mod:`.distill`) must
  reproduce its teacher's free feature vectors on the family's tokens, and a two-layer MLP
  interpolates ``h`` generic points with ``h`` hidden units; at exactly that width the fit
  stalls on some seeds (docs), so an MLP map's ``hidden`` is
  ``max(default, HIDDEN_PER_TOKEN · tokens)`` (tokens: the queries and every token they
  attend to).  A run trained from a random start keeps its width.
- **Power at length N.**  The power mean ``(mean |e|^p)^(1/p)`` of ``S`` errors is within a
  factor ``S^(1/p)`` of their maximum, so it tracks the worst sequence only where
  ``p ≳ ln S``.  At length 3 the calibrated ``p = 8`` stands (it was measured there on
  families of every size).  At length ``N > 3`` a family whose step scores ``S`` sequences
  trains at ``p = max(8, round(POWER_PER_LOG · ln S))``: on the layer families the worst
  sequences are a few in 10⁵ and ``p = 8`` leaves them behind (docs).

:func:`family_shape` computes the facts (numpy; cached per family), :func:`sized_fields` the
fields.  The record of a run keeps both (``recipe``).
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

#: Span (natural log units of kernel ratio) above which a family is *steep*: every held-out
#: Hadamard and constant-weight family of length 3 has S ≤ 3.43 and trains at temperature 1;
#: the ladder families m = 48 (S = 4.32) and m = 64 (S = 6.54) train faster or only at 1/2.
STEEP_SPAN = 4.0
#: Temperature of a log-space map on a steep family.
STEEP_TEMPERATURE = 0.5
#: How many times the recipe's steps a steep family trains.
STEEP_STEPS = 2
#: Hidden units per token of a distilled MLP map (module docstring): calibrated on the held-out
#: constant-weight family m = 120, n = 36 (72 tokens), where 72 units fit 2 of 4 seeds' teachers
#: and 144 fit all four.
HIDDEN_PER_TOKEN = 2
#: At length N > 3, the power of the power-mean loss per unit of ``ln S`` (S: sequences a
#: step scores); calibrated on the layer family m = 10, N = 7 (S = 17,576: p = 20).
POWER_PER_LOG = 2.0


@dataclass(frozen=True)
class FamilyShape:
    """What sizes the recipe: ``overlap_rank`` (rank of the queries' overlaps with every token
    they attend to), ``span`` (see the module docstring), ``length`` N, ``queries``, ``tokens``,
    ``sequences`` (what one full-batch step scores: a product family's two-candidate sequences
    in a batch, else the family's sequences)."""

    overlap_rank: int
    span: float
    length: int
    queries: int
    tokens: int
    batches: int = 1  # steps per epoch of a product family trained in its two-candidate form
    sequences: int = 0

    def power(self, calibrated: float) -> float:
        """The power-mean power the family needs, at least the ``calibrated`` one (module docstring)."""
        if self.length <= 3 or self.sequences < 2:
            return calibrated
        return float(max(calibrated, round(POWER_PER_LOG * math.log(self.sequences))))

    @property
    def steep(self) -> bool:
        return self.span > STEEP_SPAN

    def as_dict(self) -> dict:
        return {**asdict(self), "span": round(self.span, 4), "steep": self.steep}


#: Query rows scored at a time by :func:`level_span` (bounds its memory on a large family).
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
    """The :class:`FamilyShape` of a family (either layout): the candidates' levels are those
    of every candidate token of the family (a product family's sequences draw from them all)."""
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
    """Sequences one step scores: a product family's two-candidate sequences (a batch of them
    where it trains in batches), else the family's sequences."""
    if not isinstance(family, ProductFamily):
        return len(family)
    batch = firsts_per_step(family)
    per_first = len(family.queries) * len(family.candidates)
    return two_candidate_count(family) if batch is None else batch * per_first


def product_batches(family: AnyFamily) -> int:
    """Training steps that see every two-candidate sequence once, for a model in the
    two-candidate form: 1 unless ``family`` is a product trained in batches of first-slot
    candidates (:func:`kernelgap.training.two_candidate.firsts_per_step`)."""
    if not isinstance(family, ProductFamily) or (family.length == 3 and family.sequence_count <= MAX_EXPANDED):
        return 1
    batch = firsts_per_step(family)
    return 1 if batch is None else -(-len(family.candidates) // batch)


@functools.lru_cache(maxsize=64)
def _shape_of(key: str, spec_type: type) -> FamilyShape:
    return family_shape(spec_type.parse(json.loads(key)).load())


def shape_of(spec) -> FamilyShape:
    """:func:`family_shape` of a :class:`~kernelgap.training.config.FamilySpec`, remembered per
    spec (a sweep sizes many runs of one family)."""
    return _shape_of(json.dumps(spec.model_dump(), sort_keys=True), type(spec))


def sized_run(run):
    """``run`` (a :class:`~kernelgap.training.config.RunConfig`) with the fields it left unset
    sized (:func:`sized_fields`), marked sized and carrying its ``recipe``."""
    model_update, train_update, recipe = sized_fields(run)
    update = {}
    if model_update:
        update["model"] = run.model.model_copy(update=model_update)
    if train_update:
        update["train"] = run.train.model_copy(update=train_update)
    out = run.model_copy(update=update)
    out._sized, out._recipe_steps, out._recipe = True, False, recipe
    return out


def sized_fields(run) -> tuple[dict, dict, dict | None]:
    """``(model updates, train updates, recipe)`` for a :class:`~kernelgap.training.config.RunConfig`:
    the fields the module docstring sizes that the run left unset, and ``recipe`` — what the
    record keeps (``{"family": FamilyShape.as_dict(), "sized": {field: value}}``), or None
    when nothing could be sized (a module, or every sizable field given)."""
    model = run.model
    if model.built_elsewhere:
        return {}, {}, None
    given = model.model_fields_set
    wants_width = "d_value" not in given
    wants_slope = model.log_space and "temperature" not in given
    wants_steps = run.recipe_steps
    wants_power = "power" not in run.train.model_fields_set
    wants_hidden = run.train.distill and model.projection == "mlp" and "hidden" not in given
    if not (wants_width or wants_slope or wants_steps or wants_power or wants_hidden):
        return {}, {}, None
    shape = shape_of(run.family)
    model_update, train_update = {}, {}
    if wants_width:
        default = type(model).model_fields["d_value"].default
        width = max(default, shape.overlap_rank)
        if width != model.d_value:
            model_update["d_value"] = width
    if wants_hidden:
        hidden = max(type(model).model_fields["hidden"].default, HIDDEN_PER_TOKEN * shape.tokens)
        if hidden != model.hidden:
            model_update["hidden"] = hidden
    if wants_slope and shape.steep:
        model_update["temperature"] = STEEP_TEMPERATURE
    if wants_power:
        power = shape.power(type(run.train).model_fields["power"].default)
        if power != run.train.power:
            train_update["power"] = power
    if wants_steps:
        batches = shape.batches if reducible_spec(model) else 1
        factor = (STEEP_STEPS if shape.steep else 1) * math.sqrt(batches)
        steps = math.ceil(run.train.max_steps * factor)
        if steps != run.train.max_steps:
            train_update["max_steps"] = steps
    return model_update, train_update, {"family": shape.as_dict(), "sized": {**model_update, **train_update}}
