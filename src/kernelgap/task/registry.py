"""The registry of family builders, and the one place their parameters are checked.

Each builder is a function of keyword parameters returning a family, registered under a
name (``exhaustive``, ``witness``, ``ladder``, …).  Its signature is its parameters' schema:
each annotation a pydantic type with its constraints (``Annotated[Int, Field(ge=2)]``,
:data:`Seed`, :data:`Size`, ``Literal[…]`` for choices), each default the parameter's
default.  :func:`register_family` turns it into the family's strict pydantic model
(:data:`PARAMS`), from which :func:`parse_params` reads ``key=value`` strings,
:func:`check_values` checks values and :func:`describe_parameters` lists them.  A builder
may also register, as functions of its validated parameters (``p.m``, ``p.n``), a *check*
that refuses what cannot be built (a code larger than its Johnson bound, say) and a
*memory* estimate of the bytes its build allocates: both arithmetic on the parameters,
fast whatever their size.

:func:`check_params` applies all of it — names, types, ranges, the check, then the memory
estimate against the limit of :mod:`kernelgap.limits` — before anything is allocated, and
:func:`build_family` calls it, so no builder repeats these checks.  The builders register
themselves when :mod:`kernelgap.task` is imported (docs/adding-a-family.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..errors import FamilyError
from ..limits import check_memory
from ..validation import Int, Number, error_line, type_adapter
from .family import AnyFamily
from .family_file import load_family

FamilyBuilder = Callable[..., AnyFamily]
FAMILIES: dict[str, FamilyBuilder] = {}
#: ``check(params)``: a :class:`FamilyError` for what cannot be built.
CHECKS: dict[str, Callable[[Any], None]] = {}
#: ``memory(params) -> bytes``, by arithmetic on the parameters only.
MEMORY: dict[str, Callable[[Any], int]] = {}


#: A numpy seed (``default_rng`` takes integers ≥ 0).
Seed = Annotated[Int, Field(ge=0)]
#: A count or a dimension.
Size = Annotated[Int, Field(ge=1)]
#: A share strictly between 0 and 1.
Fraction = Annotated[Number, Field(gt=0, lt=1)]
#: A query position (1-based).
Position = Annotated[Int, Field(ge=1)]
#: Which side of a train/test split a family is.
Split = Literal["train", "test"]


class FamilyParams(BaseModel):
    """A family's parameters (:func:`params_model` makes one per builder): strict types, no
    unknown keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


#: Every registered family's parameter model.
PARAMS: dict[str, type[FamilyParams]] = {}


def params_model(name: str, fn: FamilyBuilder) -> type[FamilyParams]:
    """The builder's keyword parameters as a pydantic model: each annotation its field's
    type and constraints, each default its default (a parameter without one is required)."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {
        key: (hints.get(key, Any), ... if p.default is inspect.Parameter.empty else p.default)
        for key, p in inspect.signature(fn).parameters.items()
    }
    title = "".join(part.title() for part in name.replace("-", "_").split("_")) + "Params"
    return create_model(title, __base__=FamilyParams, __doc__=inspect.getdoc(fn), **fields)


def register_family(
    name: str, memory: Callable[[Any], int] | None = None, check: Callable[[Any], None] | None = None
) -> Callable[[FamilyBuilder], FamilyBuilder]:
    """Decorator: make a builder available as ``build_family(name, ...)``; ``check`` and
    ``memory`` (module docstring) run on the validated parameters before the builder.  A
    second builder of a name already taken (a copied module left unrenamed) is refused."""

    def deco(fn: FamilyBuilder) -> FamilyBuilder:
        other = FAMILIES.get(name)
        if other is not None and (other.__module__, other.__qualname__) != (fn.__module__, fn.__qualname__):
            raise TypeError(f"family {name!r} is registered twice: {other.__module__} and {fn.__module__}")
        FAMILIES[name] = fn
        PARAMS[name] = params_model(name, fn)
        if memory is not None:
            MEMORY[name] = memory
        if check is not None:
            CHECKS[name] = check
        return fn

    return deco


def family_names() -> list[str]:
    return sorted(FAMILIES)


def family_parameters(name: str) -> dict[str, FieldInfo]:
    """The parameters of a registered family: ``{name: pydantic field}``, in builder order."""
    if name not in FAMILIES:
        raise FamilyError(f"unknown family {name!r}; choose from {', '.join(family_names())}")
    return dict(PARAMS[name].model_fields)


def parameter_schemas(name: str) -> dict[str, dict]:
    """The JSON schema of each parameter of a registered family, in builder order."""
    family_parameters(name)  # validates the name
    return _schema(PARAMS[name])["properties"]


@cache
def _schema(model: type[FamilyParams]) -> dict:
    return model.model_json_schema()


#: How :func:`describe_parameters` names a JSON schema's types and bounds.
_NOUNS = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false"}
_SIGNS = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}


def _takes(schema: dict) -> str:
    """What a parameter's JSON schema admits: ``an integer ≥ 2 and ≤ 64``, ``one of train,
    test``, ``an integer ≥ 1 or none``."""
    if "anyOf" in schema:
        return " or ".join("none" if option.get("type") == "null" else _takes(option) for option in schema["anyOf"])
    if "enum" in schema:
        return f"one of {', '.join(map(str, schema['enum']))}"
    bounds = " and ".join(f"{sign} {schema[key]}" for key, sign in _SIGNS.items() if key in schema)
    return " ".join(filter(None, [_NOUNS.get(schema.get("type", ""), "any value"), bounds]))


def describe_parameters(name: str) -> list[str]:
    """One line per parameter, from its JSON schema: ``m: an integer ≥ 1 (default 12)``."""
    lines = []
    for key, schema in parameter_schemas(name).items():
        default = schema.get("default", ...)
        shown = "" if default is ... else f" (default {'none' if default is None else default})"
        lines.append(f"{key}: {_takes(schema)}{shown}")
    return lines


def parse_params(name: str, raw: dict[str, str]) -> dict:
    """``key=value`` strings as the family's parameter types (``none`` or ``null`` where a
    parameter may be left out); ranges and choices are checked by :func:`check_values`."""
    schemas = parameter_schemas(name)
    out = {}
    for key, text in raw.items():
        if key not in schemas:
            raise FamilyError(_unknown(name, key))
        out[key] = _convert(text, schemas[key], key)
    return out


def _unknown(name: str, key: str) -> str:
    """The refusal of an unknown parameter, listing what the family takes (one line)."""
    return f"family {name!r} has no parameter {key!r}; it takes {'; '.join(describe_parameters(name))}"


#: The Python type of each JSON schema type a parameter may have.
_TYPES = {"integer": int, "number": float, "string": str, "boolean": bool}


def _convert(text, schema: dict, key: str):
    """One value from the command line, read by pydantic's lax mode as the parameter's type."""
    options = schema.get("anyOf", [schema])
    typ = _TYPES.get(options[0].get("type", ""))
    if not isinstance(text, str) or typ is None:
        return text
    if {"type": "null"} in options and text.lower() in ("none", "null"):
        return None
    try:
        return type_adapter(typ).validate_python(text, strict=False)
    except ValidationError:
        raise FamilyError(f"parameter {key}={text!r} is not a valid {typ.__name__}") from None


def check_values(name: str, params: dict) -> dict:
    """The complete parameters of a build (defaults filled in), each checked by the family's
    model against its name, type and declared range only; a :class:`FamilyError` naming the
    parameter otherwise.  :func:`check_params` adds the family's check and the memory limit."""
    fields = family_parameters(name)  # validates the name
    for key in params:
        if key not in fields:
            raise FamilyError(_unknown(name, key))
    try:
        return dict(PARAMS[name].model_validate(params))
    except ValidationError as exc:
        raise FamilyError(f"family {name!r}: {error_line(exc)}") from None


def memory_estimate(name: str, full: dict) -> int:
    """The bytes a build of the complete parameters ``full`` (:func:`check_values`) allocates,
    by the family's memory estimate; 0 for a family without one."""
    return MEMORY[name](PARAMS[name].model_construct(**full)) if name in MEMORY else 0


def check_params(name: str, params: dict) -> dict:
    """The complete parameters of a build (defaults filled in), every one checked: its name,
    type and range (:func:`check_values`), then the family's own check and the memory
    limit; a :class:`FamilyError` naming the parameter otherwise."""
    full = check_values(name, params)
    if name in CHECKS:
        try:
            CHECKS[name](PARAMS[name].model_construct(**full))
        except FamilyError as exc:
            raise FamilyError(f"family {name!r}: {exc}") from None
    asked = ", ".join(f"{k}={full[k]:,}" if type(full[k]) is int else f"{k}={full[k]}" for k in params)
    check_memory(f"family {name!r}" + (f" ({asked})" if asked else ""), memory_estimate(name, full), FamilyError)
    return full


def build_family(name: str, **params) -> AnyFamily:
    """Build a registered family; bad names or parameters are :class:`FamilyError`, raised by
    :func:`check_params` before anything is allocated."""
    full = check_params(name, params)  # before the look-up: an unknown name is refused in one line
    return FAMILIES[name](**full)


def is_family_file(family: str) -> bool:
    """Whether a command line's ``--family`` names a family file (a path that exists or ends in
    ``.json``) rather than a registered family."""
    return family.endswith(".json") or Path(family).is_file()


def check_family_argument(family: str, params: dict[str, str], load: bool = True) -> dict | None:
    """A command line's ``--family`` and ``-p key=value`` parameters checked, each problem a
    one-line :class:`FamilyError`: a family file exists and takes no parameters (``load``: and
    is loaded); a registered family's name and parameter names are known, its parameters'
    values read (``load``: and checked, :func:`check_params`, as ``family.params: …``).  The
    registered family's parameters, read; None for a file."""
    if is_family_file(family):
        if params:
            raise FamilyError("-p parameters apply to a registered family, not to a family file")
        if not Path(family).is_file():
            raise FamilyError(f"family file {family} does not exist")
        if load:
            load_family(Path(family).resolve())
        return None
    values = parse_params(family, params)
    if load:
        try:
            check_params(family, values)
        except FamilyError as exc:
            raise FamilyError(f"family.params: {exc}") from None
    return values
