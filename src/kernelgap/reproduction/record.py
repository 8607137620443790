"""``reproduce.json``: a reproduction folder's own record (profile, the profile's experiment
folders, every invocation), read and checked where it is read (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path

from ..errors import KernelgapError
from ..io import read_json

#: A reproduction's own record (profile, the profile's experiment folders, invocations).
META = "reproduce.json"


def read_meta(root: str | Path) -> dict:
    """``reproduce.json`` of a reproduction folder (``{}`` when there is none), its shape
    checked where it is read: an object whose ``profile`` is a string, ``user_experiments``
    an object of folder paths, ``commands`` a list of strings and ``invocations`` a list
    of objects with a ``command`` string and a ``wall_time_s`` number (or null).  Anything
    else is one :class:`KernelgapError` naming the file."""
    path = Path(root) / META
    if not path.exists():
        return {}
    meta = read_json(path)
    if meta is None:
        raise KernelgapError(f"{path} is corrupted (not valid JSON); restore it or rerun `kernelgap reproduce`")
    why = _meta_problem(meta)
    if why:
        raise KernelgapError(f"{path} is not a kernelgap reproduction record: {why}")
    return meta


def _meta_problem(meta) -> str | None:
    if not isinstance(meta, dict):
        return f"expected a JSON object, got {type(meta).__name__}"
    if "profile" in meta and not isinstance(meta["profile"], str):
        return f"'profile' must be a string, got {meta['profile']!r}"
    user = meta.get("user_experiments")
    if user is not None and not (isinstance(user, dict) and all(isinstance(v, str) for v in user.values())):
        return f"'user_experiments' must be an object of experiment folders, got {user!r}"
    commands = meta.get("commands")
    if commands is not None and not (isinstance(commands, list) and all(isinstance(c, str) for c in commands)):
        return "'commands' must be a list of strings"
    runs = meta.get("invocations")
    if runs is not None:
        if not isinstance(runs, list) or not all(isinstance(i, dict) for i in runs):
            return "'invocations' must be a list of objects"
        for k, i in enumerate(runs):
            if not isinstance(i.get("command"), str):
                return f"invocations[{k}] has no 'command' string"
            for key in ("wall_time_s", "sweeps_s"):
                if i.get(key) is not None and not is_number(i[key]):
                    return f"invocations[{k}].{key} must be a number, got {i[key]!r}"
            steps = i.get("steps_s")
            if steps is not None and not (isinstance(steps, dict) and all(is_number(v) for v in steps.values())):
                return f"invocations[{k}].steps_s must be an object of numbers, got {steps!r}"
    return None


def is_number(value) -> bool:
    """A JSON number: an int or a float, not a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def invocations(meta: dict) -> list[dict]:
    """Every recorded invocation of a reproduction (folders of older versions list commands only)."""
    return meta.get("invocations") or [{"command": c} for c in meta.get("commands", [])]
