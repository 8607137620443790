"""The JSON schema of sweep files (docs/formats.md, "Sweep files"), built from the config
models into ``sweep.schema.json`` beside this module by ``make schema``."""

from __future__ import annotations

import json
from pathlib import Path

from ..models.specs import model_table_schema
from ..task.registry import PARAMS, family_names
from ..training import FamilySpec, TrainConfig
from .config import DEF_KEY, SECTIONS, SweepFile, Variant

#: The JSON schema of sweep files (:func:`sweep_schema`), shipped with the package.
SCHEMA_FILE = Path(__file__).with_name("sweep.schema.json")


def sweep_schema() -> dict:
    """The JSON schema (draft 2020-12) of a sweep file, built from the config models: the
    sections, the grid (every field an axis) and the variants.  Section fields are all
    optional here (:func:`load_sweep` checks each run and the cross-field rules)."""
    defs: dict = {}
    for name, schema in (
        ("FamilySpec", FamilySpec.model_json_schema(ref_template="#/$defs/{model}")),
        ("ModelSpec", model_table_schema("#/$defs/{model}")),  # the fields of every kind
        ("TrainConfig", TrainConfig.model_json_schema(ref_template="#/$defs/{model}")),
    ):
        defs.update(schema.pop("$defs", {}))
        defs[name] = schema
    defs = _plain(defs)
    family = defs.pop("FamilySpec")
    del family["properties"]["sha256"]  # computed from the file, never given
    defs["FamilySection"] = {**family, "allOf": _family_params(defs)}
    defs["Grid"] = _axes(
        {"seed": {"type": "integer"}, **{k: {"$ref": f"#/$defs/{_section_def(k)}"} for k in SECTIONS}},
        defs,
        "grid axes: each key a non-empty list of values (the runs are their product)",
    )
    top = SweepFile.model_json_schema(ref_template="#/$defs/{model}")
    for name, schema in top.pop("$defs", {}).items():  # the models inside a sweep file: Variant
        defs[name] = {**_plain(schema), "description": _first_line({"Variant": Variant}[name])}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kernelgap sweep file",
        "description": 'docs/formats.md, "Sweep files"; regenerate with `make schema`',
        **_plain(top),
        "required": [k for k, f in SweepFile.model_fields.items() if f.is_required()],
        "$defs": dict(sorted(defs.items())),
    }


def _first_line(cls: type) -> str:
    """A model's docstring as a schema description: its first sentence, lower case."""
    text = " ".join((cls.__doc__ or "").split()).split(". ")[0].rstrip(".")
    return text[:1].lower() + text[1:]


def _family_params(defs: dict) -> list[dict]:
    """For each registered family, its parameters' schema where a section names it."""
    out = []
    for name in family_names():
        model = PARAMS[name]
        defs[model.__name__] = {**_plain(model.model_json_schema()), "description": f"parameters of the {name} family"}
        named = {"properties": {"name": {"const": name}}, "required": ["name"]}
        out.append({"if": named, "then": {"properties": {"params": {"$ref": f"#/$defs/{model.__name__}"}}}})
    return out


def write_sweep_schema(path: str | Path = SCHEMA_FILE) -> Path:
    """Write :func:`sweep_schema` as JSON (what ``make schema`` runs)."""
    path = Path(path)
    path.write_text(json.dumps(sweep_schema(), indent=2, ensure_ascii=False) + "\n")
    return path


def _section_def(section: str) -> str:
    return {"family": "FamilySection", "test_family": "FamilySection", "model": "ModelSpec"}.get(section, "TrainConfig")


def _plain(node):
    """A schema as a sweep file meets it: no titles, class docstrings, ``required`` lists or
    null (TOML has none)."""
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if options and any(o == {"type": "null"} for o in options):
        rest = [o for o in options if o != {"type": "null"}]
        merged = {k: v for k, v in node.items() if k not in ("anyOf", "default") or (k == "default" and v is not None)}
        node = {**(rest[0] if len(rest) == 1 else {"anyOf": rest}), **merged}
    if DEF_KEY in node:
        node = {"$ref": f"#/$defs/{node[DEF_KEY]}", **{k: v for k, v in node.items() if k != DEF_KEY}}
    out = {k: _plain(v) for k, v in node.items() if k not in ("required", "title")}
    if "properties" in out:
        out.pop("description", None)
    return out


def _axes(properties: dict, defs: dict, description: str | None = None) -> dict:
    """A table of grid axes over ``properties`` (:func:`_axis`)."""
    out = {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: _axis(v, defs) for k, v in properties.items()},
    }
    if description:
        out["description"] = description
    return out


def _axis(schema: dict, defs: dict) -> dict:
    """One grid axis: a non-empty list of values of ``schema``; for a table, also a table of axes."""
    values = {"type": "array", "minItems": 1, "items": {k: v for k, v in schema.items() if k != "default"}}
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    target = options[0] if len(options) == 1 else {}
    if "$ref" in target:
        target = defs[target["$ref"].rsplit("/", 1)[1]]
    if "properties" in target:
        return {"anyOf": [values, _axes(target["properties"], defs)]}
    if target.get("type") == "object":
        return {"anyOf": [values, {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}}]}
    return values
