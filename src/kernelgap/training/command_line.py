"""The run of ``kernelgap train``'s flags: the same models, defaults and checks as a sweep
file's run (a flag not given is its spec's default), validated before torch is imported."""

from __future__ import annotations

from ..args import key_values
from ..models.specs import FIELDS_ONLY
from .config import EXPLICIT_MODEL_KEYS, FamilySpec, RunConfig


def command_line_run(family: str, params: list[str], model: dict, train: dict, seed) -> RunConfig:
    """The validated run of ``kernelgap train``'s flags (``None``: not given), with the same
    models, defaults and checks as a sweep file's run: a model field the kind does not use,
    given on the command line, is refused as in a sweep file's ``[model]`` table.  The family
    argument and every field are checked before torch is imported; then the run is made (its
    feature map resolved)."""
    from ..task.registry import check_family_argument

    given = {k: v for k, v in model.items() if v is not None}
    check_family_argument(family, key_values(params))  # a family file loaded, parameters checked
    raw = {
        "family": FamilySpec.named_or_file(family, params),
        "model": given,
        "train": {k: v for k, v in train.items() if v is not None or k in ("lr", "stop_below")},
        "seed": seed,
    }
    context = {EXPLICIT_MODEL_KEYS: set(given) - {"kind"}}
    RunConfig.parse(raw, context={**context, FIELDS_ONLY: True})
    return RunConfig.parse(raw, context=context).validate()
