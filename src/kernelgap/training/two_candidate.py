"""How a product family trains in its two-candidate form: which models the reduction covers
and how many first-slot candidates a step takes (docs/theory.md, "Training on product
families").  Torch-free: the recipe sizes a run's steps from it (:mod:`.recipe`) before any
model is built; :mod:`.product` trains with it.
"""

from __future__ import annotations

from ..models import ModelSpec
from ..task.family import MAX_EXPANDED, AnyFamily, ProductFamily

#: Most two-candidate sequences of one member scored in one step: a family with at most
#: these many (``Q·C²``) trains full batch; above it each step takes every query with a
#: batch of first-slot candidates c and every c′ (:attr:`ProductScored.batch`), and the
#: whole family is checked in chunks of about this size.
PAIRS_PER_STEP = 1 << 20


def two_candidate_form(heads: int, position_dependent: bool, causal: bool, nonnegative: bool) -> bool:
    """Whether an attention model is covered by the two-candidate reduction (module
    docstring): one head, position-free maps, no causal mask, a nonnegative kernel."""
    return heads == 1 and not position_dependent and not causal and nonnegative


def reducible_spec(spec: ModelSpec) -> bool:
    """:func:`two_candidate_form` for a spec (kernel or softmax; a module is not covered)."""
    return not spec.built_elsewhere and two_candidate_form(*spec.attention_shape, not spec.signed_kernel)


def two_candidate_count(family: ProductFamily) -> int:
    """``Q·C²``: the two-candidate sequences ``(x; c, c′, …, c′)``."""
    return len(family.queries) * len(family.candidates) ** 2


def firsts_per_step(family: ProductFamily, pairs: int | None = None) -> int | None:
    """First-slot candidates per training step: None (all of them, full batch) when the
    family has at most ``pairs`` (default :data:`PAIRS_PER_STEP`) two-candidate sequences,
    else as many as fit with every query and every c′ (at least one).

    Batches of first-slot candidates rather than of queries: every query's and every
    candidate's parameters then get a gradient at every step, where a batch of queries
    leaves the others' rows still between its steps; on a large ladder family at its
    certified rank query batches stall above the exact threshold and candidate batches
    reach it (docs/experiments.md, "The bound curve", has the measurements)."""
    pairs = pairs or PAIRS_PER_STEP
    if two_candidate_count(family) <= pairs:
        return None
    return max(1, pairs // (len(family.queries) * len(family.candidates)))


def training_family(family: AnyFamily, spec: ModelSpec) -> AnyFamily:
    """The family a model of ``spec`` trains on: a sequence family as it is; a product family
    expanded where that is small (at most :data:`~kernelgap.task.family.MAX_EXPANDED`
    sequences) and either of length 3 (the two-candidate sequences are then the family
    itself: the expanded sequences train exactly as they always have) or not covered by the
    reduction; otherwise the product itself (:func:`.product.product_scored`)."""
    if not isinstance(family, ProductFamily):
        return family
    if family.sequence_count <= MAX_EXPANDED and (family.length == 3 or not reducible_spec(spec)):
        return family.expand()
    return family
