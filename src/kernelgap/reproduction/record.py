"""``reproduce.json``: a reproduction folder's own record (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path

from ..errors import KernelgapError
from ..io import digest_problem, read_json
from ..validation import JsonInt, JsonNumber, Record, problem

#: A reproduction's own record (profile, the profile's experiment folders, invocations).
META = "reproduce.json"
#: Its key saying every step file carries its checksum (older folders: they need only be JSON).
SEALED = "step_checksums"


class Invocation(Record):
    """One ``kernelgap reproduce`` (or ``report``) run on the folder: its command line, when
    it started, its wall time, its sweeps' and each step's seconds, and the CPU it ran on
    (PyTorch's SIMD kernels, the processor's name, the cores it could use)."""

    command: str
    started: JsonNumber | None = None
    wall_time_s: JsonNumber | None = None
    version: str | None = None
    status: str | None = None
    sweeps_s: JsonNumber | None = None
    cpu_capability: str | None = None
    cpu_model: str | None = None
    cores: JsonInt | None = None
    steps_s: dict[str, JsonNumber] | None = None


class ReproduceRecord(Record):
    """``reproduce.json``: the profile, its own experiment folders (name → path), the commands
    of older versions, every invocation, and whether its step files carry checksums."""

    profile: str = "unknown"
    step_checksums: bool | None = None
    user_experiments: dict[str, str] | None = None
    commands: list[str] = []
    invocations: list[Invocation] | None = None


def read_meta(root: str | Path) -> dict:
    """``reproduce.json`` of a reproduction folder (``{}`` when there is none), checked against
    :class:`ReproduceRecord` and its checksum; anything else is one line naming the file."""
    path = Path(root) / META
    if not path.exists():
        return {}
    meta = read_json(path)
    if meta is None:
        raise KernelgapError(f"{path} is corrupted (not valid JSON); restore it or rerun `kernelgap reproduce`")
    why = problem(ReproduceRecord, meta)
    if why:
        raise KernelgapError(f"{path} is not a kernelgap reproduction record: {why}")
    if altered := digest_problem(meta):
        raise KernelgapError(f"{path} {altered}; restore it or rerun `kernelgap reproduce` into a new --out")
    return meta


def invocations(meta: dict) -> list[dict]:
    """Every recorded invocation of a reproduction (folders of older versions list commands only)."""
    return meta.get("invocations") or [{"command": c} for c in meta.get("commands", [])]
