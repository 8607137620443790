"""The registry of family builders, and the one place their parameters are checked.

Each builder is a function of keyword parameters returning a family; it is
registered under a name so the CLI and configs can ask for ``exhaustive``,
``pool``, ``witness``, ``hadamard``, ``ladder``, … by name.  Parameters are
typed by the builder's annotations, which :func:`parse_params` uses to read
``key=value`` strings from the command line.  An annotation may carry its
allowed values, ``Annotated[int, Range(0)]`` (the aliases :data:`Seed`,
:data:`Size`, :data:`Fraction`) or ``Annotated[str, OneOf(...)]``.  A builder
may also register, as functions of its complete parameters, a *check* that
refuses what cannot be built (a code larger than its Johnson bound, say) and a
*memory* estimate (the bytes its build allocates, from the parameters alone).
Both are arithmetic on the parameters, fast whatever their size.

:func:`check_params` applies all of it — names, types, ranges, the check, then
the memory estimate against the limit of :mod:`kernelgap.limits` — before
anything is allocated;
:func:`build_family` calls it, so no builder repeats these checks.  The
builders register themselves when :mod:`kernelgap.task` is imported.
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from ..errors import FamilyError
from ..limits import check_memory
from .family import AnyFamily

FamilyBuilder = Callable[..., AnyFamily]
FAMILIES: dict[str, FamilyBuilder] = {}
#: ``check(**params)``: a :class:`FamilyError` for what cannot be built.
CHECKS: dict[str, Callable[..., None]] = {}
#: ``memory(**params) -> bytes``, by arithmetic on the parameters only.
MEMORY: dict[str, Callable[..., int]] = {}


@dataclass(frozen=True)
class Range:
    """A number's allowed interval ``lo ≤ v ≤ hi`` (``exclusive``: ``lo < v < hi``); an end
    left ``None`` is unbounded."""

    lo: float | None = None
    hi: float | None = None
    exclusive: bool = False

    def violation(self, value) -> str | None:
        if self.exclusive and self.lo is not None and self.hi is not None:
            return None if self.lo < value < self.hi else f"must lie strictly between {self.lo} and {self.hi}"
        if self.lo is not None and value < self.lo:
            return f"must be ≥ {self.lo}" if self.hi is None else f"must lie in {self.lo}..{self.hi}"
        if self.hi is not None and value > self.hi:
            return f"must be ≤ {self.hi}" if self.lo is None else f"must lie in {self.lo}..{self.hi}"
        return None


@dataclass(frozen=True)
class OneOf:
    """A string parameter's choices."""

    choices: tuple[str, ...]

    def __init__(self, *choices: str) -> None:
        object.__setattr__(self, "choices", tuple(choices))

    def violation(self, value) -> str | None:
        return None if value in self.choices else f"must be one of {', '.join(self.choices)}"


#: A numpy seed (``default_rng`` takes integers ≥ 0).
Seed = Annotated[int, Range(0)]
#: A count or a dimension.
Size = Annotated[int, Range(1)]
#: A share strictly between 0 and 1.
Fraction = Annotated[float, Range(0, 1, exclusive=True)]


def register_family(
    name: str, memory: Callable[..., int] | None = None, check: Callable[..., None] | None = None
) -> Callable[[FamilyBuilder], FamilyBuilder]:
    """Decorator: make a builder available as ``build_family(name, ...)``; ``check`` and
    ``memory`` (module docstring) run on the complete parameters before the builder."""

    def deco(fn: FamilyBuilder) -> FamilyBuilder:
        FAMILIES[name] = fn
        if memory is not None:
            MEMORY[name] = memory
        if check is not None:
            CHECKS[name] = check
        return fn

    return deco


def family_names() -> list[str]:
    return sorted(FAMILIES)


def family_parameters(name: str) -> dict[str, inspect.Parameter]:
    if name not in FAMILIES:
        raise FamilyError(f"unknown family {name!r}; choose from {', '.join(family_names())}")
    return dict(inspect.signature(FAMILIES[name]).parameters)


def _hints(name: str) -> dict[str, tuple[Any, tuple]]:
    """``{parameter: (type, constraints)}`` from the builder's annotations."""
    out = {}
    for key, hint in get_type_hints(FAMILIES[name], include_extras=True).items():
        meta: tuple = ()
        if get_origin(hint) is Annotated:
            hint, *rest = get_args(hint)
            meta = tuple(rest)
        out[key] = (hint, meta)
    return out


def _optional(typ) -> tuple[Any, bool]:
    """``(member type, None allowed)`` of ``T``, ``T | None`` or ``Optional[T]``."""
    if get_origin(typ) in (Union, types.UnionType):
        members = [a for a in get_args(typ) if a is not type(None)]
        return members[0], len(members) < len(get_args(typ))
    return typ, False


def parse_params(name: str, raw: dict[str, str]) -> dict:
    """Convert ``key=value`` strings to the builder's annotated types."""
    params = family_parameters(name)
    hints = _hints(name)
    out = {}
    for key, text in raw.items():
        if key not in params:
            raise FamilyError(f"family {name!r} has no parameter {key!r}; it takes {', '.join(params)}")
        out[key] = _convert(text, hints.get(key, (str, ()))[0], key)
    return out


def _convert(text, typ, key: str):
    if not isinstance(text, str):
        return text
    base, nullable = _optional(typ)
    if nullable and text.lower() in ("none", "null"):
        return None
    try:
        if base is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        if base in (int, float, str):
            return base(text)
        if getattr(base, "__origin__", None) is tuple or base is tuple:
            return tuple(int(v) for v in text.split(",") if v)
    except ValueError:
        raise FamilyError(f"parameter {key}={text!r} is not a valid {getattr(base, '__name__', base)}") from None
    return text


def _type_violation(value, typ) -> str | None:
    """Why ``value`` is not of the parameter type ``typ`` (None when it is)."""
    base, nullable = _optional(typ)
    if value is None:
        return None if nullable else "must be given (not None)"
    if base is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if base is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "must be a number"
        return None if math.isfinite(value) else "must be a finite number"
    if base is str:
        return None if isinstance(value, str) else "must be a string"
    return None


def check_values(name: str, params: dict) -> dict:
    """The complete parameters of a build (defaults filled in), each checked against its
    name, type and declared range only; a :class:`FamilyError` naming the parameter
    otherwise.  :func:`check_params` adds the family's check and the memory limit."""
    family_parameters(name)  # validates the name
    try:
        bound = inspect.signature(FAMILIES[name]).bind(**params)
    except TypeError as exc:
        raise FamilyError(f"family {name!r}: {exc}") from None
    bound.apply_defaults()
    full = dict(bound.arguments)
    for key, (typ, constraints) in _hints(name).items():
        if key not in full or key == "return":
            continue
        value = full[key]
        why = _type_violation(value, typ)
        if why is None and value is not None:
            why = next((w for c in constraints if (w := c.violation(value)) is not None), None)
        if why is not None:
            raise FamilyError(f"family {name!r}: {key} {why}, got {value!r}")
    return full


def check_params(name: str, params: dict) -> dict:
    """The complete parameters of a build (defaults filled in), every one checked: its name,
    type and range (:func:`check_values`), then the family's own check and the memory
    limit; a :class:`FamilyError` naming the parameter otherwise."""
    full = check_values(name, params)
    if name in CHECKS:
        try:
            CHECKS[name](**full)
        except FamilyError as exc:
            raise FamilyError(f"family {name!r}: {exc}") from None
    if name in MEMORY:
        asked = ", ".join(
            f"{k}={v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{k}={v}" for k, v in params.items()
        )
        check_memory(f"family {name!r}" + (f" ({asked})" if asked else ""), MEMORY[name](**full), FamilyError)
    return full


def build_family(name: str, **params) -> AnyFamily:
    """Build a registered family; bad names or parameters are :class:`FamilyError`, raised by
    :func:`check_params` before anything is allocated."""
    full = check_params(name, params)
    return FAMILIES[name](**full)
