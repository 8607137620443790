"""Shared pieces of the fault tests: a small float64 sweep and record comparison."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

KERNELGAP = str(Path(sys.executable).parent / "kernelgap")

#: Eight tasks of two runs (seeds 0 and 1 stack), 0.3–0.5 s each on one core (`wall_time_s`);
#: float64 so that results are compared bitwise.
SWEEP = """
name = "faults"
[family]
name = "hadamard"
params = {m = 12}
[model]
feature_map = "table"
rank = 4
[train]
mse_steps = 60
max_steps = 60
stop_below = 0.1
dtype = "float64"
[grid]
seed = [0, 1]
train.lr = [0.03, 0.025, 0.02, 0.015, 0.01, 0.0075, 0.005, 0.0025]
"""
TOTAL = 16

#: Fields of a record that legitimately differ between two runs of the same config (the
#: record's own checksum covers its wall time).
VOLATILE = ("wall_time_s", "record_sha256")


def sweep_cmd(cfg: Path, out: Path, *extra: str) -> list[str]:
    return [KERNELGAP, "sweep", str(cfg), "--out", str(out), "--workers", "1", "--json", *extra]


def results(out: Path) -> dict[str, dict]:
    """Every finished result of a folder, by run id (raw JSON, never parsed leniently)."""
    runs = out / "runs"
    return {p.name[:-5]: json.loads(p.read_text()) for p in runs.glob("*.json")} if runs.is_dir() else {}


def stable(record: dict) -> dict:
    """A record without its wall-clock fields: what must be bitwise reproducible."""
    return {k: v for k, v in record.items() if k not in VOLATILE}


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a sweep started with ``start_new_session=True`` and all its workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, pgid)`` of a process from ``/proc/<pid>/stat``, or ``None`` once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[2])


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (zombies excluded), from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        info = proc_stat(int(stat.parent.name))
        if info is not None and info[2] == pgid and info[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def sweep_processes(driver: int) -> dict[int, str]:
    """The live processes of a driver started with ``start_new_session=True``, by role:
    ``driver``, ``forkserver``, ``worker`` (a child of the forkserver), ``resource tracker``."""
    members = group_members(driver)
    parent = {p: (proc_stat(p) or ("", 0, 0))[1] for p in members}
    servers = {p for p in members if parent[p] == driver and "multiprocessing.forkserver import main" in cmdline(p)}
    roles = {}
    for pid in members:
        if pid == driver:
            roles[pid] = "driver"
        elif pid in servers:
            roles[pid] = "forkserver"
        elif "multiprocessing.resource_tracker import main" in cmdline(pid):
            roles[pid] = "resource tracker"
        elif parent[pid] in servers:
            roles[pid] = "worker"
        else:
            roles[pid] = "other"
    return roles
