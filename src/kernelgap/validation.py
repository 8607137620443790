"""Config models: pydantic models that validate and coerce their own fields, and the one
line a bad value becomes.

Every config a run is made of (:class:`~kernelgap.training.FamilySpec`,
:class:`~kernelgap.training.TrainConfig`, the model specs, :class:`~kernelgap.training.RunConfig`)
is a :class:`Config`: unknown keys are refused, types are strict (an int is accepted for
a float and becomes one; a string is never parsed as a number; a bool is not an int:
:data:`Int`, :data:`Number`), ranges and choices are pydantic's own constraints
(``Field(ge=…)``, ``Literal``; :class:`Says` gives a type a message of its own) and
other rules are validators raising :func:`invalid`.  :func:`error_line` makes a
:class:`pydantic.ValidationError` one line: the dotted key, pydantic's or the type's
message, the value given::

    train: unknown key 'learning_rate' (expected one of device, distill, dtype, …)
    train.mse_steps: input should be a valid integer, got 'two'
    model.rank: input should be greater than or equal to 1, got 0

The JSON files kernelgap writes and reads back (``summary.json`` and its sections,
``reproduce.json``, ``probe.json``) are :class:`Record` models; :func:`problem` says in one
line where a file breaks its model.  Checks that depend on the machine or on the family
(devices, memory, family files) are each config's ``validate()``, not the models'.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import (
    AllowInfNan,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    TypeAdapter,
    ValidationError,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from .errors import ConfigError, KernelgapError

#: The pydantic error type of the project's own messages (:func:`invalid`).
ERROR_TYPE = "kernelgap"

#: An integer and nothing else: a bool, a float or a string is refused.  "A bool is not a
#: number" is said here once; every model of the package is strict besides.
Int = Annotated[int, Strict()]
#: A finite number: an int (which becomes a float) or a float, never a bool or a string.
Number = Annotated[float, Strict(), AllowInfNan(False)]


def _whole(value, inner):
    """An integral float checked as the int JSON Schema takes it for (``2.0`` is an
    ``integer``), and kept as given (:func:`_as_given`)."""
    inner(int(value) if type(value) is float and value.is_integer() else value)
    return value


def _as_given(value, inner):
    """``value`` checked by its type and kept as given: an int stays an int in a float field,
    so a record written from its model reads as the value it was built from (``3``, not ``3.0``)."""
    inner(value)
    return value


#: A JSON integer, as JSON Schema's ``integer`` reads one: an int or an integral float, never
#: a bool (the files kernelgap writes and reads back: summaries, records).
JsonInt = Annotated[int, Strict(), WrapValidator(_whole)]
#: A JSON number: an int or a float (NaN and infinities as Python's JSON writes them), never a bool.
JsonNumber = Annotated[float, Strict(), WrapValidator(_as_given)]


def json_at_least(low: int):
    return Annotated[JsonInt, Field(ge=low)]


def invalid(text: str, path: str | None = None) -> PydanticCustomError:
    """The error a validator raises: ``text``, a whole sentence, said of the validated value
    or of the key ``path`` (dotted) below it (:func:`error_line` names it)."""
    return PydanticCustomError(ERROR_TYPE, "{text}", {"text": text, "path": path})


@dataclass(frozen=True)
class Says:
    """Metadata of a type (after its constraints): ``text`` (``{value}`` or ``{shown}``: the
    value's repr) refuses whatever value the type refuses, instead of pydantic's message."""

    text: str

    def __get_pydantic_core_schema__(self, source, handler):
        def check(value, inner):
            try:
                return inner(value)
            except ValidationError:
                raise invalid(self.text.format(value=repr(value), shown=repr(value)).strip()) from None

        return core_schema.no_info_wrap_validator_function(check, handler(source))


def between(low: int, high: int):
    return Annotated[Int, Field(ge=low, le=high)]


PositiveInt = Annotated[Int, Field(ge=1)]
#: A float that is finite and > 0 (learning rates, scales, temperatures).
FinitePositive = Annotated[Number, Field(gt=0)]


def one_of(choices):
    return typing.Literal[tuple(choices)]


class Config(BaseModel):
    """A config model (module docstring); ``WHERE`` names it in messages when built alone
    (``model``, ``train``…); fields may be given positionally, as to a dataclass."""

    model_config = ConfigDict(extra="forbid", strict=True)

    WHERE: ClassVar[str] = ""

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
            raise ConfigError(error_line(exc, self.WHERE)) from None

    # Nested configs are validated by pydantic itself, not through this constructor (their
    # errors keep their place in the enclosing config and its validation context).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data):
        """A table's unknown key refused first, with the keys the model knows."""
        for key in data if isinstance(data, dict) else ():
            if key not in cls.model_fields:
                raise invalid(f"unknown key {key!r} (expected one of {', '.join(sorted(cls.model_fields))})")
        return data

    @classmethod
    def parse(cls, data, where: str | None = None, context: dict | None = None):
        """``data`` (a table of plain values, or an instance) validated; a
        :class:`~kernelgap.errors.ConfigError` naming ``where.key`` otherwise."""
        try:
            return cls.model_validate(data, context=context)
        except ValidationError as exc:
            raise ConfigError(error_line(exc, cls.WHERE if where is None else where)) from None


class Record(BaseModel):
    """A JSON file kernelgap writes and reads back (``summary.json``, ``reproduce.json``,
    ``probe.json``): the keys it names are checked, strictly as JSON Schema types them
    (:data:`JsonInt`, :data:`JsonNumber`), others are let through.  Every value is kept as
    given, so :meth:`dump` gives back the JSON it was built from."""

    model_config = ConfigDict(extra="allow", strict=True)

    #: The keys as given, in their order (:meth:`dump` gives them back in it).
    _given: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data, handler):
        record = handler(data)
        if isinstance(data, dict):
            record._given = tuple(data)
        return record

    def dump(self) -> dict:
        """The record as plain JSON values: the keys it was given, in the order given, each
        value as given (a field left at its default is left out, as it was)."""
        return {key: _plain(getattr(self, key)) for key in self._given}


def _plain(value):
    if isinstance(value, Record):
        return value.dump()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class Section(Record):
    """A part of ``summary.json`` an experiment builds (its section and the rows in it): only
    the keys it names, each of its type, on building as on reading back; a result file that
    does not fit it is one line (:class:`~kernelgap.errors.KernelgapError`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def __init__(self, /, **data) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise KernelgapError(f"summary.json cannot be built: {error_line(exc, type(self).__name__)}") from None

    # Nested sections are validated by pydantic itself, not through this constructor.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


@functools.cache
def type_adapter(kind) -> TypeAdapter:
    """A cached :class:`pydantic.TypeAdapter` of ``kind``."""
    return TypeAdapter(kind)


def fits(kind, value) -> bool:
    """Whether ``value`` is a ``kind`` (:data:`JsonNumber`, :data:`Int`, …), strictly: a bool
    is no number."""
    try:
        type_adapter(kind).validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


def problem(model: type[BaseModel], value, where: str = "") -> str | None:
    """Where ``value`` (a file's JSON) breaks ``model``, in one line (:func:`error_line`):
    ``expected a JSON object, got list``, ``invocations.0.command: field required``; ``None``
    where it fits."""
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    try:
        model.model_validate(value, strict=True)
    except ValidationError as exc:
        return error_line(exc, where)
    return None


def error_line(exc: ValidationError, where: str = "") -> str:
    """The first error of ``exc`` (a value given wrong before a key left out) in one line: its
    key path below ``where``, dotted, then pydantic's message and the value given, or a
    validator's own sentence (:func:`invalid`)."""
    error = min(exc.errors(include_url=False), key=lambda e: e["type"] == "missing")
    own = error["type"] == ERROR_TYPE
    path = error["ctx"]["path"] if own else None
    name = ".".join(str(part) for part in (where, *error["loc"], path) if part not in (None, ""))
    text = error["msg"] if own else error["msg"][:1].lower() + error["msg"][1:]
    if not own and error["type"] != "missing":
        shown = repr(error["input"])
        text += f", got {shown if len(shown) <= 60 else shown[:59] + '…'}"
    return f"{name}: {text}" if name else text
