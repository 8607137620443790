"""The schema of ``summary.json``: the shared part (``base.schema.json``) with each
registered experiment's fragment under its key (experiments sharing a key merge theirs)."""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources

from ..experiments.registry import experiments as registered


@cache
def base_schema() -> dict:
    return json.loads((resources.files("kernelgap.report") / "base.schema.json").read_text())


def summary_schema(experiments=None) -> dict:
    """The JSON schema a summary of these experiments (default: the built-in ones) follows."""
    schema = copy.deepcopy(base_schema())
    props, required = schema["properties"], schema["required"]
    for exp in registered() if experiments is None else experiments:
        if exp.section is None:
            continue
        key, fragment = exp.summary_key, copy.deepcopy(exp.schema or {})
        if key in props:
            fragment = {**props[key], **fragment,
                        "properties": {**props[key].get("properties", {}), **fragment.get("properties", {})}}
        props[key] = fragment
        if key not in required:
            required.append(key)
    return schema
