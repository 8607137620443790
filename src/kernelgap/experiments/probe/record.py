"""``probe.json``, read where a report reads it: its shape checked field by field, anything
else one :class:`~kernelgap.errors.ConfigError` naming the file (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...io import read_json

#: ``probe.json``'s fields a report reads, with their JSON types (``None``: may be null);
#: the first three are required.
PROBE_FIELDS: dict[str, tuple] = {
    "target": (str,),
    "runs": (str,),
    "suites": (list,),
    "class": (str, None),
    "kwargs": (dict, None),
    "interface": (str, None),
    "args": (dict, None),
    "output": (int, None),
    "d_model": (int, None),
    "profile": (str, None),
    "source_hash": (str, None),
    "reading": (str, None),
    "parameters": (dict, None),
    "baseline": (str, None),
    "baseline_dir": (str, None),
    "twin": (str, None),
    "recipes": (str, None),
}
#: The fields of one of its ``suites``; the first three are required.
SUITE_FIELDS: dict[str, tuple] = {
    "name": (str,),
    "family": (str,),
    "params": (dict,),
    "folder": (str, None),
    "baseline_folder": (str, None),
    "test_params": (dict, None),
    "certified_rank": (int, None),
    "features": (list, None),
    "query_blind": (dict, None),
    "twin_ranks": (list, None),
    "twin_features": (list, None),
    "twin_folder": (str, None),
    "recipes": (list, None),
    "recipe_folder": (str, None),
}


def _field_problem(table: dict, fields: dict[str, tuple], required: int, where: str) -> str | None:
    for k, (key, types) in enumerate(fields.items()):
        if key not in table:
            if k < required:
                return f"{where}has no {key!r}"
            continue
        value = table[key]
        ok = (value is None and None in types) or (
            not isinstance(value, bool) and isinstance(value, tuple(t for t in types if t is not None))
        )
        if not ok:
            kinds = " or ".join(
                "null" if t is None else {str: "a string", list: "a list", dict: "an object", int: "an integer"}[t]
                for t in types
            )
            return f"{where}{key!r} must be {kinds}, got {value!r}"
    return None


def read_probe_meta(folder: Path) -> dict | None:
    """``probe.json`` of a probe folder (``None`` when there is none), its shape checked
    against :data:`PROBE_FIELDS` and :data:`SUITE_FIELDS`: anything else is one
    :class:`~kernelgap.errors.ConfigError` naming the file."""
    path = folder / "probe.json"
    if not path.exists():
        return None
    meta = read_json(path)
    if meta is None:
        raise ConfigError(f"{path} is corrupted (not valid JSON); move it aside or rerun `kernelgap probe`")
    if not isinstance(meta, dict):
        why = f"expected a JSON object, got {type(meta).__name__}"
    elif isinstance(meta.get("runs"), list):
        why = "its runs are inside it (a probe of an older kernelgap); rerun `kernelgap probe`"
    else:
        why = _field_problem(meta, PROBE_FIELDS, 3, "")
        for k, suite in enumerate(meta.get("suites") if why is None else []):
            why = (
                f"suites[{k}] must be an object"
                if not isinstance(suite, dict)
                else _field_problem(suite, SUITE_FIELDS, 3, f"suites[{k}] ")
            )
            if why:
                break
    if why:
        raise ConfigError(f"{path} is not a kernelgap probe record: {why}")
    return meta
