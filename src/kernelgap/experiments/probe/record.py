"""``probe.json``, read where a report reads it: checked against :class:`ProbeRecord`,
anything else one :class:`~kernelgap.errors.ConfigError` naming the file and the key
(docs/formats.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ...errors import ConfigError
from ...io import confined, digest_problem, read_json
from ...validation import Int, Record, problem

#: What a probe of a profile leaves in its folder when its library is not installed (sealed).
SKIPPED = "skipped.json"


class ProbeSuite(Record):
    """One suite of a probe: its family and parameters, where its runs, the baseline's, the
    twin's and the recipes' are, its certified rank and true feature counts."""

    name: str
    family: str
    params: dict[str, Any]
    folder: str | None = None
    baseline_folder: str | None = None
    test_params: dict[str, Any] | None = None
    certified_rank: Int | None = None
    features: list[Any] | None = None
    query_blind: dict[str, Any] | None = None
    twin_ranks: list[Any] | None = None
    twin_features: list[Any] | None = None
    twin_folder: str | None = None
    recipes: list[Any] | None = None
    recipe_folder: str | None = None


class ProbeRecord(Record):
    """``probe.json``: the module probed (``target``, its class, arguments and source hash),
    where its runs are and its suites (the fields a report reads)."""

    target: str
    runs: str
    suites: list[ProbeSuite]
    class_: str | None = Field(None, alias="class")
    kwargs: dict[str, Any] | None = None
    interface: str | None = None
    args: dict[str, Any] | None = None
    output: Int | None = None
    d_model: Int | None = None
    profile: str | None = None
    source_hash: str | None = None
    reading: str | None = None
    parameters: dict[str, Any] | None = None
    baseline: str | None = None
    baseline_dir: str | None = None
    twin: str | None = None
    recipes: str | None = None


def read_probe_meta(folder: Path) -> dict | None:
    """``probe.json`` of a probe folder (``None`` when there is none), checked against its
    own checksum (``record_sha256``, where it has one) and :class:`ProbeRecord`: anything
    else is one :class:`~kernelgap.errors.ConfigError` naming the file."""
    path = folder / "probe.json"
    if not path.exists():
        return None
    meta = read_json(path)
    if meta is None:
        raise ConfigError(f"{path} is corrupted (not valid JSON); move it aside or rerun `kernelgap probe`")
    if isinstance(meta, dict) and (altered := digest_problem(meta)):
        raise ConfigError(f"{path} {altered}; move it aside or rerun `kernelgap probe`")
    if isinstance(meta, dict) and isinstance(meta.get("runs"), list):
        why = "its runs are inside it (a probe of an older kernelgap); rerun `kernelgap probe`"
    else:
        why = problem(ProbeRecord, meta)
    if why:
        raise ConfigError(f"{path} is not a kernelgap probe record: {why}")
    for base, key, name in _folders(folder, meta):  # read from the file: none leads out of its folder
        confined(base, name, f"{path}: {key}", ConfigError)
    return meta


def _folders(folder: Path, meta: dict) -> list[tuple[Path, str, str]]:
    """The sub-folder names ``probe.json`` holds, each with the folder it is relative to
    and its key: the runs and recipes in the probe folder, the baseline's and the twin's in
    the baseline folder (``baseline_dir``, which may be a folder shared by several probes)."""
    runs = folder / meta["runs"]
    baseline = folder / (meta.get("baseline_dir") or "baseline")
    out = [(folder, "runs", meta["runs"])]
    for k, suite in enumerate(meta["suites"]):
        where = f"suites[{k}]."
        out += [(runs, where + "folder", suite.get("folder") or suite["name"])]
        out += [(folder, where + "recipe_folder", suite["recipe_folder"])] if suite.get("recipe_folder") else []
        out += [(baseline, where + key, suite[key]) for key in ("baseline_folder", "twin_folder") if suite.get(key)]
    return out
