"""``kernelgap check DIR``: verify a whole results folder (one sweep folder or several)
without changing it (docs/formats.md, "Verifying a results folder").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ..errors import KernelgapError
from ..io import read_json
from ..report.integrity import folder_problems, missing_what, read_sweep_meta, sweep_folders
from .store import is_valid_record


def check_folder(
    root: str | Path,
    summary_check: Callable[[Path], list[str]] | None = None,
    damage: Callable[[Path, Callable], list[str]] | None = None,
) -> dict:
    """What was verified and every problem found, one line each (read-only).  The
    reproduction layer, which this one cannot import, gives ``summary_check`` (further
    problems of ``summary.json``) and ``damage(root, valid)`` (the problems ``report`` finds;
    by default the sweep folders' alone)."""
    root = Path(root)
    if not root.is_dir():
        why = "is a file, not a folder" if root.exists() else "does not exist"
        raise KernelgapError(f"results folder {root} {why}")
    folders = sweep_folders(root)
    if not folders:
        raise KernelgapError(f"{root} holds no sweep folder (no sweep.json in it or below it)")
    problems = (damage or folder_problems)(root, is_valid_record)
    ids: set[str] = set()
    counts: dict[str, int] = {}
    seen = {"runs": 0, "checkpoints": set(), "unverified_checkpoints": set(), "family_copies": 0}
    damaged = {line.split(":", 1)[0] for line in problems}
    for folder in folders:
        meta, _ = read_sweep_meta(folder)
        if meta is None:
            continue
        seen["family_copies"] += len(meta.family_files)
        prefix = "" if folder == root else f"{folder.relative_to(root).as_posix()}/"
        verified = [i for i in meta.runs if f"{prefix}runs/{i}.json" not in damaged]
        for run_id in verified:
            where = read_json(folder / "runs" / f"{run_id}.json").get("checkpoint")  # a verified CheckpointRef
            if where is not None:
                seen["checkpoints" if "sha256" in where else "unverified_checkpoints"].add(folder / where["file"])
        ids.update(verified)
        seen["runs"] += len(verified)
        if folder != root:
            top = folder.relative_to(root).parts[0]
            counts[top] = counts.get(top, 0) + len(verified)
    problems += summary_problems(root, ids, counts)
    if summary_check is not None:
        problems += summary_check(root)
    return {
        "folder": str(root),
        "sweeps": len(folders),
        "runs": seen["runs"],
        "checkpoints": len(seen["checkpoints"]),
        "unverified_checkpoints": len(seen["unverified_checkpoints"] - seen["checkpoints"]),
        "family_copies": seen["family_copies"],
        "problems": problems,
    }


def check_lines(result: dict) -> list[str]:
    """One line per problem, then the total."""
    verified = (
        f"{result['sweeps']} sweep folder(s), {result['runs']} runs, {result['checkpoints']} checkpoints, "
        f"{result['family_copies']} family copies"
    )
    if result["unverified_checkpoints"]:
        verified += f" ({result['unverified_checkpoints']} checkpoints written without a sha256: present only)"
    lines = [f"{Path(result['folder']).as_posix()}/{p}" for p in result["problems"]]
    lines.append(f"{result['folder']}: {len(result['problems'])} problem(s) in {verified}")
    return lines


def summary_problems(root: Path, record_ids: set[str], counts: dict[str, int]) -> list[str]:
    """``summary.json`` against the runs: every run id it names is verified (``record_ids``),
    and each experiment's run count is its folder's (``counts``)."""
    path = root / "summary.json"
    if not path.exists():
        return []
    summary = read_json(path)
    if not isinstance(summary, dict):
        return [f"summary.json: {missing_what(path) if not path.is_file() else 'is corrupted (not a JSON object)'}"]
    named = sorted(_ids(summary) - record_ids)
    out = [f"summary.json: names run {i}, which has no verified record" for i in named]
    timing = summary.get("timing")
    per = timing.get("experiments") if isinstance(timing, dict) else None
    for name, entry in sorted(per.items()) if isinstance(per, dict) else ():
        said = entry.get("runs") if isinstance(entry, dict) else None
        if name in counts and said != counts[name]:
            out.append(f"summary.json: counts {said} runs of {name}; its folder holds {counts[name]} verified")
    return out


def _ids(obj) -> set[str]:
    """Every run id (``"id"``: 16 hex digits) a summary names, at any depth."""
    if isinstance(obj, dict):
        own = {obj["id"]} if isinstance(obj.get("id"), str) and re.fullmatch(r"[0-9a-f]{16}", obj["id"]) else set()
        return own.union(*(_ids(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_ids(v) for v in obj))
    return set()
