"""The schema of ``summary.json``: the shared part (``base.schema.json``) with each
registered experiment's fragment under its key (experiments sharing a key merge theirs),
and :func:`schema_problem`, which checks a summary against it where one is read (the
results page) without jsonschema, a test dependency only."""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources

from ..experiments.registry import experiments as registered


@cache
def base_schema() -> dict:
    return json.loads((resources.files("kernelgap.reproduction") / "base.schema.json").read_text())


def summary_schema(experiments=None) -> dict:
    """The JSON schema a summary of these experiments (default: the built-in ones) follows."""
    schema = copy.deepcopy(base_schema())
    props, required = schema["properties"], schema["required"]
    for exp in registered() if experiments is None else experiments:
        if exp.section is None:
            continue
        key, fragment = exp.summary_key, copy.deepcopy(exp.schema or {})
        if key in props:
            fragment = {
                **props[key],
                **fragment,
                "properties": {**props[key].get("properties", {}), **fragment.get("properties", {})},
            }
        props[key] = fragment
        if key not in required:
            required.append(key)
    return schema


_TYPES = {"object": dict, "array": list, "string": str}


def _is(value, kind: str) -> bool:
    """JSON Schema's type test (``integer`` includes integral floats; booleans are no numbers)."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return kind == "number" or isinstance(value, int) or value.is_integer()
    return isinstance(value, _TYPES[kind])


def _equal(a, b) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or (_is(a, "number") and _is(b, "number") and a == b)


def schema_problem(value, schema, root: dict | None = None, where: str = "") -> str | None:
    """The first place where ``value`` breaks ``schema`` (``"witness.runs[0].rank: …"``), or
    ``None``.  The keywords the summary's schema uses are checked — ``type``, ``const``,
    ``enum``, ``minimum``, ``maximum``, ``required``, ``properties``,
    ``additionalProperties``, ``items`` and local ``$ref`` — so a summary can be checked
    without jsonschema (a test dependency only; the tests hold the two to agree)."""
    root = schema if root is None else root
    at = where or "the summary"
    if schema is True or schema is None:
        return None
    if schema is False:
        return f"{at}: not allowed"
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        if (why := schema_problem(value, target, root, where)) is not None:
            return why
    if "type" in schema:
        kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        if not any(_is(value, k) for k in kinds):
            return f"{at}: expected {' or '.join(kinds)}, got {json.dumps(value)[:60]}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{at}: must be {json.dumps(schema['const'])}, got {json.dumps(value)[:60]}"
    if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
        return f"{at}: must be one of {', '.join(map(json.dumps, schema['enum']))}, got {json.dumps(value)[:60]}"
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{at}: must be ≥ {schema['minimum']}, got {value}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{at}: must be ≤ {schema['maximum']}, got {value}"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, item in value.items():
            sub = props.get(key, schema.get("additionalProperties", True))
            if (why := schema_problem(item, sub, root, f"{where}.{key}" if where else key)) is not None:
                return why
        for key in schema.get("required", []):
            if key not in value:
                return f"{at}: {key!r} is missing"
    if isinstance(value, list) and "items" in schema:
        for k, item in enumerate(value):
            if (why := schema_problem(item, schema["items"], root, f"{where}[{k}]")) is not None:
                return why
    return None
