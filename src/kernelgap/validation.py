"""Config models: pydantic models that validate and coerce their own fields, and the one
line a bad value becomes.

Every config a run is made of (:class:`~kernelgap.training.FamilySpec`,
:class:`~kernelgap.training.TrainConfig`, :class:`~kernelgap.models.ModelSpec`,
:class:`~kernelgap.models.external.ModuleSpec`, :class:`~kernelgap.training.RunConfig`)
is a :class:`Config`: unknown keys are refused, types are strict (an int is accepted for
a float and becomes one; a string is never parsed as a number; a bool is not an int), and
ranges and choices are field validators.  A :class:`pydantic.ValidationError` never leaves
this module: :meth:`Config.parse` and the constructor turn it into one
:class:`~kernelgap.errors.ConfigError` line naming the key::

    unknown key train.'learning_rate' (expected one of device, dtype, lr, …)
    train.mse_steps: expected int, got 'two'
    model.rank must be ≥ 1, got 0

Checks that depend on the machine or on the family a model is trained on (devices,
memory and rank limits, family files and registered parameters' ranges) are not part of
the models: each config's ``validate()`` makes them.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from .errors import ConfigError

#: The pydantic error type of the validators below (:func:`invalid`).
ERROR_TYPE = "kernelgap"


def invalid(text: str, path: str | None = None, whole: bool = False) -> PydanticCustomError:
    """The error a validator raises.  The message is the dotted name of what failed (the
    validated field, or ``path`` below it) followed by ``text`` (`` must be ≥ 1, got 0``,
    ``: unknown feature map …``); with ``whole`` it is ``text`` alone.  ``{where}`` in
    ``text`` stands for the dotted name of the validated object."""
    ctx: dict[str, Any] = {"text": text, "whole": whole}
    if path:
        ctx["path"] = path
    return PydanticCustomError(ERROR_TYPE, "{text}", ctx)


def checked(base: type, test, text: str, schema: dict):
    """``base`` whose values must pass ``test``; ``text`` (with ``{value}``, ``{shown}``: the
    value and its repr) follows the field's name when one does not; ``schema`` is its JSON schema."""

    def check(value):
        if not test(value):
            raise invalid(text.format(value=value, shown=repr(value)))
        return value

    return Annotated[base, AfterValidator(check), WithJsonSchema(schema)]


def at_least(low: int):
    """An int ≥ ``low``."""
    return checked(int, lambda v: v >= low, f" must be ≥ {low}, got {{value}}", {"type": "integer", "minimum": low})


def between(low: int, high: int):
    """An int in ``low..high`` (the message names the side it crossed)."""

    def check(value: int) -> int:
        if value < low:
            raise invalid(f" must be ≥ {low}, got {value}")
        if value > high:
            raise invalid(f" must be ≤ {high:,}, got {value:,}")
        return value

    return Annotated[int, AfterValidator(check), WithJsonSchema({"type": "integer", "minimum": low, "maximum": high})]


PositiveInt = at_least(1)
NonNegativeInt = at_least(0)
#: A float that is finite and > 0 (learning rates, scales, temperatures).
FinitePositive = checked(
    float,
    lambda v: math.isfinite(v) and v > 0,
    " must be a finite number > 0, got {value}",
    {"type": "number", "exclusiveMinimum": 0},
)


def one_of(choices, text: str | None = None):
    """A string among ``choices`` (``text``: the message after the field's name)."""
    text = text or f" must be one of {', '.join(choices)}, got {{shown}}"
    return checked(str, lambda v: v in choices, text, {"type": "string", "enum": list(choices)})


def dotted(*parts) -> str:
    return ".".join(str(p) for p in parts if p not in (None, ""))


class Config(BaseModel):
    """A config model: strict types, no unknown keys, one-line errors (module docstring).

    ``WHERE`` is how the model is named in messages when built alone (``model``,
    ``train``…); fields may be given positionally, in their order, as to a dataclass."""

    model_config = ConfigDict(extra="forbid", strict=True)

    WHERE: ClassVar[str] = ""
    #: Sections (top-level fields holding configs) in the order their errors are reported.
    ERROR_ORDER: ClassVar[tuple[str, ...]] = ()

    def __init__(self, /, *args, **data) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
        for name, value in zip(names, args):
            if name in data:
                raise TypeError(f"{type(self).__name__} got two values for {name!r}")
            data[name] = value
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(explain(exc, type(self), self.WHERE)) from None

    # Nested configs are validated by pydantic itself, not through this constructor (their
    # errors keep their place in the enclosing config and its validation context).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def parse(cls, data, where: str | None = None, context: dict | None = None):
        """``data`` (a table of plain values, or an instance) validated; a
        :class:`~kernelgap.errors.ConfigError` naming ``where.key`` otherwise."""
        try:
            return cls.model_validate(data, context=context)
        except ValidationError as exc:
            raise ConfigError(explain(exc, cls, cls.WHERE if where is None else where)) from None


def explain(exc: ValidationError, model: type[BaseModel], where: str = "") -> str:
    """The first problem of ``exc`` in one line.  As a user reads a file: every unknown key
    and wrong type before any value out of range, sections in ``model.ERROR_ORDER``, and
    within a section unknown keys first."""
    errors = exc.errors(include_url=False)
    order = list(getattr(model, "ERROR_ORDER", ()))

    def rank(item):
        i, e = item
        top = str(e["loc"][0]) if e["loc"] else ""
        section = order.index(top) if top in order else 0
        return (e["type"] == ERROR_TYPE, section, e["type"] != "extra_forbidden", i)

    _, first = min(enumerate(errors), key=rank)
    return describe(first, model, where)


def describe(error: dict, model: type[BaseModel], where: str = "") -> str:
    """One pydantic error as one line, named by its dotted key below ``where``."""
    raw = [str(p) for p in error["loc"]]
    loc = untagged(model, raw)
    kind = error["type"]
    if kind == ERROR_TYPE:
        ctx = error["ctx"]
        base = dotted(where, *loc)
        text = ctx["text"].replace("{where}", base)
        return text if ctx.get("whole") else dotted(base, ctx.get("path")) + text
    if kind == "extra_forbidden":
        owner = model_at(model, raw[:-1])
        known = f" (expected one of {', '.join(sorted(owner.model_fields))})" if owner is not None else ""
        return f"unknown key {dotted(dotted(where, *loc[:-1]), repr(loc[-1]))}{known}"
    name = dotted(where, *loc) or "config"
    if kind == "missing":
        return f"{name} is missing (it has no default)"
    expected = expected_type(model, raw)
    if expected is None:
        return f"{name}: {error['msg'][:1].lower()}{error['msg'][1:]}, got {error.get('input')!r}"
    return f"{name}: expected {expected}, got {error.get('input')!r}"


def model_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """The config class at ``loc`` (as pydantic gives it) below ``model``, None where there
    is none; in a union tagged by ``kind``, the member the tag after the field names."""
    return _walk(model, loc)[1]


def untagged(model: type[BaseModel], loc: list[str]) -> list[str]:
    """``loc`` without the tags pydantic puts after a union tagged by ``kind`` (an error at
    ``model.kernel.rank`` is named ``model.rank``)."""
    return _walk(model, loc)[0]


def _walk(model: type[BaseModel] | None, loc: list[str]) -> tuple[list[str], type[BaseModel] | None]:
    names: list[str] = []
    i = 0
    while i < len(loc):
        names.append(loc[i])
        field = model.model_fields.get(loc[i]) if model is not None else None
        found = _models_in(field.annotation) if field is not None else []
        member = _tagged(found, loc[i + 1] if i + 1 < len(loc) else None)
        model = member or (found[0] if found else None)
        i += 2 if member is not None else 1
    return names, model


def _tagged(found: list[type[BaseModel]], tag: str | None) -> type[BaseModel] | None:
    """The member of ``found`` whose ``kind`` is ``tag``, where ``found`` is a tagged union."""
    if len(found) < 2 or tag is None:
        return None
    for option in found:
        field = option.model_fields.get("kind")
        if field is not None and typing.get_args(field.annotation) == (tag,):
            return option
    return None


def expected_type(model: type[BaseModel], loc: list[str]) -> str | None:
    """What the field at ``loc`` takes, as a sweep file names it: ``int``, ``float``,
    ``str``, ``bool``, ``dict``, or ``a table`` for a config of its own."""
    if not loc:
        return "a table"
    owner = model_at(model, loc[:-1])
    field = owner.model_fields.get(loc[-1]) if owner is not None else None
    if field is None:
        return None
    names = []
    for option in _options(field.annotation):
        if option is type(None):
            continue  # TOML has no null
        if isinstance(option, type) and issubclass(option, BaseModel):
            names.append("a table")
        elif typing.get_origin(option) is typing.Literal:
            names += [repr(value) for value in typing.get_args(option)]
        else:
            names.append(getattr(typing.get_origin(option) or option, "__name__", str(option)))
    return " or ".join(names) or None


def _options(annotation) -> tuple:
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(a for arg in typing.get_args(annotation) for a in _options(arg))
    return (annotation,)


def _models_in(annotation) -> list[type[BaseModel]]:
    return [o for o in _options(annotation) if isinstance(o, type) and issubclass(o, BaseModel)]
