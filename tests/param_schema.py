"""What a registered family's parameter declares, read from its JSON schema
(:func:`kernelgap.task.registry.parameter_schemas`): the fuzz and limit tests draw values
outside it."""

from __future__ import annotations

#: JSON schema's bounds as pydantic's constraints name them.
SIDES = {"minimum": "ge", "exclusiveMinimum": "gt", "maximum": "le", "exclusiveMaximum": "lt"}
TYPES = {"integer": int, "number": float, "string": str, "boolean": bool}


def _first(schema: dict) -> dict:
    """The schema of the value a parameter takes (``T`` of ``T | None``)."""
    return schema.get("anyOf", [schema])[0]


def bounds(schema: dict) -> dict:
    """``{"ge": 1, "lt": 2, …}``: the bounds a parameter declares."""
    return {SIDES[key]: value for key, value in _first(schema).items() if key in SIDES}


def choices(schema: dict) -> tuple | None:
    """The values of a parameter of choices (None for any other)."""
    return tuple(_first(schema)["enum"]) if "enum" in _first(schema) else None


def base_type(schema: dict) -> type | None:
    """The Python type of a parameter's values (``int`` for ``int | None``)."""
    return TYPES.get(_first(schema).get("type"))
