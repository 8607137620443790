"""Config models: pydantic models that validate and coerce their own fields, and the one
line a bad value becomes.

Every config a run is made of (:class:`~kernelgap.training.FamilySpec`,
:class:`~kernelgap.training.TrainConfig`, :class:`~kernelgap.models.ModelSpec`,
:class:`~kernelgap.models.external.ModuleSpec`, :class:`~kernelgap.training.RunConfig`)
is a :class:`Config`: unknown keys are refused, types are strict (an int is accepted for
a float and becomes one; a string is never parsed as a number; a bool is not an int:
:data:`Int`, :data:`Number`), ranges and choices are pydantic's own constraints
(``Field(ge=…)``, ``Literal``; :class:`Says` gives a field a message of its own) and
other rules are validators raising :func:`invalid`.  A :class:`pydantic.ValidationError`
never leaves this module: :meth:`Config.parse` and the constructor turn it into one
:class:`~kernelgap.errors.ConfigError` line naming the key::

    unknown key train.'learning_rate' (expected one of device, dtype, lr, …)
    train.mse_steps: expected int, got 'two'
    model.rank must be ≥ 1, got 0

The other models of the package — a family's parameters (:mod:`kernelgap.task.registry`),
a family file's structure, a sweep file's layout, ``profile.toml`` — use the same types;
:func:`requirement` and :func:`violation` say in words what a field takes and why a value
does not fit it.

The JSON files kernelgap writes and reads back (``summary.json`` and its sections,
``reproduce.json``, ``probe.json``) are :class:`Record` models, typed as JSON types its
values (:data:`JsonInt`, :data:`JsonNumber`); :func:`problem` says in one line where a file
breaks its model, and :func:`fits` tells whether one value is of a type.

Checks that depend on the machine or on the family a model is trained on (devices,
memory and rank limits, family files and registered parameters' ranges) are not part of
the models: each config's ``validate()`` makes them.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from .errors import ConfigError

#: The pydantic error type of the validators below (:func:`invalid`).
ERROR_TYPE = "kernelgap"
#: Pydantic's errors for a value of the right type that its field refuses (reported after
#: every unknown key and wrong type, :func:`explain`).
CONSTRAINT_ERRORS = {
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "literal_error",
    "finite_number",
}

#: An integer and nothing else: a bool, a float or a string is refused.  "A bool is not a
#: number" is said here once; every model of the package is strict besides.
Int = Annotated[int, Strict()]
#: A finite number: an int (which becomes a float) or a float, never a bool or a string.
Number = Annotated[float, Strict(), AllowInfNan(False)]


def _whole(value):
    """An integral float as the int JSON Schema takes it for (``2.0`` is an ``integer``)."""
    return int(value) if type(value) is float and value.is_integer() else value


#: A JSON integer, as JSON Schema's ``integer`` reads one: an int or an integral float, never
#: a bool (the files kernelgap writes and reads back: summaries, records).
JsonInt = Annotated[int, Strict(), BeforeValidator(_whole)]
#: A JSON number: an int or a float (NaN and infinities as Python's JSON writes them), never a bool.
JsonNumber = Annotated[float, Strict()]


def json_at_least(low: int):
    """A :data:`JsonInt` ≥ ``low``."""
    return Annotated[JsonInt, Field(ge=low)]


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


@dataclass(frozen=True)
class Says:
    """A constrained field's own refusal: the text after its dotted name (``{value}``,
    ``{shown}``: the value and its repr), instead of the one :func:`refusal` writes."""

    text: str


def at_least(low: int):
    """An int ≥ ``low``."""
    return Annotated[Int, Field(ge=low)]


def between(low: int, high: int):
    """An int in ``low..high`` (the message names the side it crossed)."""
    return Annotated[Int, Field(ge=low, le=high)]


PositiveInt = at_least(1)
#: A float that is finite and > 0 (learning rates, scales, temperatures).
FinitePositive = Annotated[Number, Field(gt=0), Says(" must be a finite number > 0, got {value}")]


def one_of(choices, text: str | None = None):
    """A string among ``choices`` (``text``: the message after the field's name)."""
    choice = typing.Literal[tuple(choices)]
    return Annotated[choice, Says(text)] if text else choice


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


class Record(BaseModel):
    """A JSON file kernelgap writes and reads back (``summary.json`` and its sections,
    ``reproduce.json``, ``probe.json``): the keys it names are checked, strictly as JSON
    Schema types them (:data:`JsonInt`, :data:`JsonNumber`), others are let through.  The
    models only check: a file is written from plain values, never re-serialised from them."""

    model_config = ConfigDict(extra="allow", strict=True)


@functools.cache
def _adapter(kind) -> TypeAdapter:
    return TypeAdapter(kind)


def fits(kind, value) -> bool:
    """Whether ``value`` is a ``kind`` (:data:`JsonNumber`, :data:`Int`, …), strictly: a bool
    is no number."""
    try:
        _adapter(kind).validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


#: JSON's names of the types :func:`expected_type` names as a TOML file does.
_JSON_NAMES = {
    "int": "integer",
    "float": "number",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "a table": "object",
}


def problem(model: type[BaseModel], value, where: str = "") -> str | None:
    """Where ``value`` (a file's JSON) breaks ``model``, in one line (:func:`explain`):
    ``expected a JSON object, got list``, ``invocations.0.command is missing``,
    ``witness.runs.0.rank: expected int, got True``; ``None`` where it fits."""
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    try:
        model.model_validate(value, strict=True)
    except ValidationError as exc:
        return explain(exc, model, where)
    return None


def explain(exc: ValidationError, model: type[BaseModel], where: str = "") -> str:
    """The first problem of ``exc`` in one line.  As a user reads a file: every unknown key
    and wrong type before any value out of range, sections in ``model.ERROR_ORDER``, and
    within a section unknown keys first (in a :class:`Record`, a key it lacks last)."""
    errors = exc.errors(include_url=False)
    order = list(getattr(model, "ERROR_ORDER", ()))
    record = issubclass(model, Record)  # a file kernelgap wrote: a wrong value before a missing key

    def rank(item):
        i, e = item
        top = str(e["loc"][0]) if e["loc"] else ""
        section = order.index(top) if top in order else 0
        late = record and e["type"] == "missing"
        return (e["type"] in (ERROR_TYPE, *CONSTRAINT_ERRORS), section, e["type"] != "extra_forbidden", late, i)

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
    field = field_at(model, raw)
    if kind in CONSTRAINT_ERRORS and field is not None:
        return name + refusal(error, field)
    if kind == "missing":  # a file kernelgap wrote lacks a key; a config leaves one out
        return f"{name} is missing" + ("" if issubclass(model, Record) else " (it has no default)")
    if kind == "too_short":
        least = error["ctx"]["min_length"]
        return f"{name}: expected at least {least} {'entry' if least == 1 else 'entries'}, got {error.get('input')!r}"
    expected = expected_type(model, raw)
    if expected is not None and issubclass(model, Record):  # a JSON file: JSON's names
        expected = " or ".join(_JSON_NAMES.get(n, n) for n in expected.split(" or "))
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
        if loc[i].isdigit():  # an item of a list of configs: the config itself
            i += 1
            continue
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


def field_at(model: type[BaseModel], loc: list[str]) -> FieldInfo | None:
    """The field at ``loc`` below ``model`` (an entry of a list field: the list's field)."""
    if not loc:
        return None
    item = loc[-1].isdigit() and len(loc) > 1
    owner = model_at(model, loc[: -2 if item else -1])
    if owner is None:
        return None
    name = loc[-2 if item else -1]
    return owner.model_fields.get(name) or next((f for f in owner.model_fields.values() if f.alias == name), None)


def expected_type(model: type[BaseModel], loc: list[str]) -> str | None:
    """What the field at ``loc`` takes, as a sweep file names it: ``int``, ``float``,
    ``str``, ``bool``, ``list``, or ``a table`` (a config of its own, or a dict)."""
    if not loc:
        return "a table"
    field = field_at(model, loc)
    if field is None:
        return None
    annotation = field.annotation
    if loc[-1].isdigit() and len(loc) > 1:  # an entry of a list field
        lists = [o for o in _options(annotation) if typing.get_origin(o) is list]
        if not lists:
            return None
        annotation = typing.get_args(lists[0])[0]
    names = []
    for option in _options(annotation):
        if option is type(None):
            continue  # TOML has no null
        if (isinstance(option, type) and issubclass(option, BaseModel)) or (
            typing.get_origin(option) or option
        ) is dict:
            names.append("a table")
        elif typing.get_origin(option) is typing.Literal:
            names += [repr(value) for value in typing.get_args(option)]
        else:
            names.append(getattr(typing.get_origin(option) or option, "__name__", str(option)))
    return " or ".join(names) or None


def refusal(error: dict, field: FieldInfo) -> str:
    """Why a constrained field refused a value of its type, after its dotted name: its own
    :class:`Says`, or `` must be ≥ 1, got 0`` (the side crossed), `` must be one of a, b,
    got 'c'``, `` must be a finite number, got nan``."""
    value = error.get("input")
    if base_type(field)[0] is float and type(value) is int:
        try:
            value = float(value)  # shown as the float it became
        except OverflowError:
            pass
    says = [m for m in _metadata(field) if isinstance(m, Says)]
    if says:
        return says[0].text.format(value=value, shown=repr(value))
    kind, ctx = error["type"], error.get("ctx", {})
    shown = f"{value:,}" if type(value) is int else f"{value}"
    if kind == "literal_error":
        return f" must be one of {', '.join(map(str, choices(field) or ()))}, got {value!r}"
    if kind == "finite_number":
        return f" must be a finite number, got {value}"
    sign = {"greater_than": ">", "greater_than_equal": "≥", "less_than": "<", "less_than_equal": "≤"}[kind]
    bound = next(iter(ctx.values()))
    bound = f"{bound:,}" if kind.startswith("less") and type(bound) is int else bound
    return f" must be {sign} {bound}, got {shown if kind.startswith('less') else value}"


def _options(annotation) -> tuple:
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(a for arg in typing.get_args(annotation) for a in _options(arg))
    return (annotation,)


def _models_in(annotation) -> list[type[BaseModel]]:
    """The config classes ``annotation`` holds (as itself, an option, or a list's items)."""
    out = []
    for option in _options(annotation):
        if typing.get_origin(option) is list:
            out += _models_in(typing.get_args(option)[0])
        elif isinstance(option, type) and issubclass(option, BaseModel):
            out.append(option)
    return out


# -- what a field takes, in words (family parameters, help texts) ------------------------------


def _metadata(field: FieldInfo) -> list:
    """A field's constraints and markers (also those of ``T`` in ``T | None``)."""
    items = list(field.metadata)
    for arg in typing.get_args(field.annotation):
        if typing.get_origin(arg) is Annotated:
            items += typing.get_args(arg)[1:]
    return [part for item in items for part in (item.metadata if isinstance(item, FieldInfo) else [item])]


def bounds(field: FieldInfo) -> dict[str, Any]:
    """The ``ge``/``gt``/``le``/``lt`` constraints of a field (also of ``T`` in ``T | None``)."""
    out: dict[str, Any] = {}
    for part in _metadata(field):
        out.update({k: getattr(part, k) for k in ("ge", "gt", "le", "lt") if hasattr(part, k)})
    return out


def choices(field: FieldInfo) -> tuple | None:
    """The values of a ``Literal`` field (None for any other)."""
    options = [a for a in _options(field.annotation) if typing.get_origin(a) is typing.Literal]
    return tuple(v for a in options for v in typing.get_args(a)) or None


def base_type(field: FieldInfo) -> tuple[type, bool]:
    """``(type, None allowed)`` of a field: ``int``, ``float``, ``str``, ``bool`` (a
    ``Literal`` of strings is ``str``)."""
    options = _options(field.annotation)
    nullable = type(None) in options
    first = next(o for o in options if o is not type(None))
    if typing.get_origin(first) is typing.Literal:
        first = type(typing.get_args(first)[0])
    return first, nullable


def _range_text(b: dict[str, Any]) -> str:
    """``≥ 1``, ``in 2..64``, ``strictly between 0 and 1`` (empty without bounds)."""
    lo, hi = b.get("ge", b.get("gt")), b.get("le", b.get("lt"))
    low, high = ("> " if "gt" in b else "≥ ") + str(lo), ("< " if "lt" in b else "≤ ") + str(hi)
    if lo is not None and hi is not None:
        if "gt" in b and "lt" in b:
            return f"strictly between {lo} and {hi}"
        return f"in {lo}..{hi}" if "ge" in b and "le" in b else f"{low} and {high}"
    return low if lo is not None else high if hi is not None else ""


def _must(phrase: str) -> str:
    return f"must {'lie' if phrase.startswith(('in ', 'strictly')) else 'be'} {phrase}"


_NOUNS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def requirement(field: FieldInfo) -> str:
    """What a field takes, in words: ``an integer ≥ 1``, ``a number strictly between 0 and
    1``, ``one of train, test``, each ``or none`` where it may be left out."""
    base, nullable = base_type(field)
    options = choices(field)
    if options:
        text = f"one of {', '.join(map(str, options))}"
    else:
        text = " ".join(
            filter(None, [_NOUNS.get(base, getattr(base, "__name__", str(base))), _range_text(bounds(field))])
        )
    return text + (" or none" if nullable else "")


def violation(error: dict, field: FieldInfo) -> str:
    """Why the value of a pydantic ``error`` does not fit ``field``, as the end of a
    sentence naming it: ``must be ≥ 0``, ``must lie in 2..64``, ``must be one of train,
    test``, ``must be an integer``, ``must be a finite number``, ``must be given``."""
    kind, value = error["type"], error.get("input")
    base, _ = base_type(field)
    if value is None and kind != "missing":
        return "must be given (not None)"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return _must(_range_text(bounds(field)))
    if kind == "literal_error":
        return f"must be one of {', '.join(map(str, choices(field) or ()))}"
    if kind == "finite_number" or (base is float and type(value) is int):
        return "must be a finite number"
    if kind == "missing":
        return "must be given"
    return f"must be {_NOUNS.get(base, getattr(base, '__name__', str(base)))}"
