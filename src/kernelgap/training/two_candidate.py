"""Which models the two-candidate reduction covers and how many first-slot candidates a step
takes (torch-free: the recipe sizes a run from it before any model is built)."""

from __future__ import annotations

from ..models import ModelSpec
from ..task.family import MAX_EXPANDED, AnyFamily, ProductFamily

#: Most two-candidate sequences of one member scored in one step (more: batches, and the
#: whole family checked in chunks of about this size).
PAIRS_PER_STEP = 1 << 20


def two_candidate_form(heads: int, position_dependent: bool, causal: bool, nonnegative: bool) -> bool:
    """Whether an attention model is covered: one head, position-free maps, no causal mask, a
    nonnegative kernel."""
    return heads == 1 and not position_dependent and not causal and nonnegative


def reducible_spec(spec: ModelSpec) -> bool:
    """:func:`two_candidate_form` for a spec (kernel or softmax; a module is not covered)."""
    return not spec.built_elsewhere and two_candidate_form(*spec.attention_shape, not spec.signed_kernel)


def two_candidate_count(family: ProductFamily) -> int:
    """``Q·C²``: the two-candidate sequences ``(x; c, c′, …, c′)``."""
    return len(family.queries) * len(family.candidates) ** 2


def firsts_per_step(family: ProductFamily, pairs: int | None = None) -> int | None:
    """First-slot candidates per step: None (full batch) up to ``pairs`` two-candidate
    sequences, else as many as fit with every query and every c′ (at least one).  Batches of
    candidates, not queries: every row then gets a gradient at every step (query batches
    stall on a large ladder; docs/experiments.md, "The bound curve")."""
    pairs = pairs or PAIRS_PER_STEP
    if two_candidate_count(family) <= pairs:
        return None
    return max(1, pairs // (len(family.queries) * len(family.candidates)))


def training_family(family: AnyFamily, spec: ModelSpec) -> AnyFamily:
    """The family a model of ``spec`` trains on: a product family expanded where small and of
    length 3 (its two-candidate sequences are the family) or not covered, else as it is."""
    if not isinstance(family, ProductFamily):
        return family
    if family.sequence_count <= MAX_EXPANDED and (family.length == 3 or not reducible_spec(spec)):
        return family.expand()
    return family
