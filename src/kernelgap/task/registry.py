"""The registry of family builders.

Each builder is a function of keyword parameters returning a family; it is
registered under a name so the CLI and configs can ask for ``exhaustive``,
``pool``, ``witness``, ``hadamard``, ``ladder``, … by name.  Parameters are
typed by the builder's annotations, which :func:`parse_params` uses to read
``key=value`` strings from the command line.  The builders register themselves
when :mod:`kernelgap.task` is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import get_type_hints

from ..errors import FamilyError
from .family import AnyFamily

FamilyBuilder = Callable[..., AnyFamily]
FAMILIES: dict[str, FamilyBuilder] = {}

def register_family(name: str) -> Callable[[FamilyBuilder], FamilyBuilder]:
    """Decorator: make a builder available as ``build_family(name, ...)``."""

    def deco(fn: FamilyBuilder) -> FamilyBuilder:
        FAMILIES[name] = fn
        return fn

    return deco


def family_names() -> list[str]:
    return sorted(FAMILIES)


def family_parameters(name: str) -> dict[str, inspect.Parameter]:
    if name not in FAMILIES:
        raise FamilyError(f"unknown family {name!r}; choose from {', '.join(family_names())}")
    return dict(inspect.signature(FAMILIES[name]).parameters)


def parse_params(name: str, raw: dict[str, str]) -> dict:
    """Convert ``key=value`` strings to the builder's annotated types."""
    params = family_parameters(name)
    hints = get_type_hints(FAMILIES[name])
    out = {}
    for key, text in raw.items():
        if key not in params:
            raise FamilyError(
                f"family {name!r} has no parameter {key!r}; it takes {', '.join(params)}"
            )
        out[key] = _convert(text, hints.get(key, str), key)
    return out


def _convert(text, typ, key: str):
    if not isinstance(text, str):
        return text
    base = typ
    if getattr(typ, "__args__", None):  # Optional[...] / unions: first non-None member
        base = next(a for a in typ.__args__ if a is not type(None))
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


def build_family(name: str, **params) -> AnyFamily:
    """Build a registered family; bad names or parameters are :class:`FamilyError`."""
    family_parameters(name)  # validates the name
    try:
        inspect.signature(FAMILIES[name]).bind(**params)
    except TypeError as exc:
        raise FamilyError(f"family {name!r}: {exc}") from None
    return FAMILIES[name](**params)


