"""``kernelgap reproduce``: every experiment's sweep into ``OUT/<experiment>/`` on one pool,
then the after-sweep steps, then the report; resumable.  ``OUT/reproduce.json`` records
every invocation, stopped ones included, so a resumed reproduction's time is their sum.
"""

from __future__ import annotations

import platform
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .. import __version__
from ..errors import KernelgapError
from ..experiments.profile import load_profile
from ..experiments.steps import local_width
from ..folders import check_out, refuse_links
from ..io import atomic_write_json
from ..report.integrity import sealed, sealed_problem
from ..sweeps.config import load_sweep
from ..sweeps.executors import available_cores, halted_pools
from ..sweeps.runner import check_pool, run_sweeps
from ..sweeps.store import is_valid_record, set_aside_file
from .record import META, SEALED, read_meta
from .report import build_report


def command_line() -> str:
    return "kernelgap " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "kernelgap reproduce"


def cpu_capability() -> str:
    """The SIMD kernels PyTorch runs on this CPU: two reproductions agree bitwise only under
    the same ones (docs/formats.md, "What bitwise covers")."""
    return torch.backends.cpu.get_cpu_capability().lower()


def cpu_model() -> str | None:
    """The processor's name, or None (CPUs with the same SIMD kernels may still round differently)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def claim_output(out: Path, profile: str) -> dict:
    """Create or reuse ``out`` (refused when it holds something else, or a symbolic link); its metadata."""
    check_out(out)
    if out.exists() and not out.is_dir():
        raise KernelgapError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not (out / META).is_file():
            raise KernelgapError(f"--out {out} is not empty and is not a kernelgap reproduction folder")
        meta = read_meta(out)  # its shape checked: one line naming the file
        if meta.get("profile") != profile:
            raise KernelgapError(f"--out {out} holds the {meta.get('profile')!r} profile, not {profile!r}")
        refuse_links(out)
        return meta
    meta = {"profile": profile, "version": __version__, "invocations": [], SEALED: True}
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / META, sealed(meta), out)
    except OSError as exc:
        raise KernelgapError(f"cannot write to --out {out}: {exc.strerror}") from None
    return meta


def reproduce(
    profile: str | Path = "quick",
    out: str | Path | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    log=print,
) -> Path:
    """Run every experiment of a profile, then write summary and report (a refusal records no invocation)."""
    check_pool(executor, workers)
    prof = load_profile(profile)
    for exp in prof.experiments:  # each sweep file read and checked as its sweep will read it
        if prof.sweep_file(exp) is not None:
            load_sweep(prof.sweep_file(exp))
    out = Path(out or f"results/reproduce-{prof.name}")
    meta = claim_output(out, prof.name)
    if prof.user_experiments:
        meta["user_experiments"] = prof.user_experiments
    else:
        meta.pop("user_experiments", None)
    invocation = {
        "command": command_line(),
        "started": time.time(),
        "version": __version__,
        "cpu_capability": cpu_capability(),
        "cpu_model": cpu_model(),
        "cores": available_cores(),
    }
    start = time.perf_counter()
    try:
        options = {"executor": executor, "workers": workers, "address": address}
        _run_experiments(prof, out, options, log, invocation, meta.get(SEALED) is True)
        invocation["status"] = "done"
    except BaseException as exc:  # an invocation that stops still counts its time
        invocation["status"] = f"stopped: {type(exc).__name__}"
        raise
    finally:
        invocation["wall_time_s"] = round(time.perf_counter() - start, 1)
        meta.setdefault("invocations", []).append(invocation)
        atomic_write_json(out / META, sealed(meta), out)  # with its checksum, as a run record
    return build_report(out, log=log, valid=is_valid_record)


def _run_experiments(prof, out: Path, options: dict, log, invocation: dict, sealed_steps: bool) -> None:
    """Every sweep on one pool, then the after-sweep steps; the invocation records their times."""
    start = time.perf_counter()
    sweeps = [(exp, prof.sweep_file(exp)) for exp in prof.experiments if prof.sweep_file(exp) is not None]
    for exp, sweep in sweeps:
        log(f"[{exp}] sweep {sweep} → {out / exp}")
    if sweeps:
        # the bar on a terminal only: piped, stderr holds errors alone (an interrupt: one line)
        results = run_sweeps([(sweep, out / exp) for exp, sweep in sweeps], progress=sys.stderr.isatty(), **options)
        for (exp, _), res in zip(sweeps, results):
            log(f"[{exp}] {res.total} runs: {res.done_before} reused, {res.ran} trained")
        log(f"[sweeps] {len(sweeps)} sweeps on one pool ({results[0].wall_time_s:.0f} s)")
    invocation["sweeps_s"] = round(time.perf_counter() - start, 1)
    invocation["steps_s"] = {}
    _run_steps(prof, out, options, log, invocation["steps_s"], sealed_steps)


def _run_steps(prof, out: Path, options: dict, log, times: dict, sealed_steps: bool) -> None:
    """The after-sweep steps, two side by side where the pool has two workers (a step that trains
    keeps them busy while others compute here); a failure stops those not started."""
    steps = [exp for exp in prof.experiments if prof.experiment(exp).step]
    width = min(2, local_width(options, len(steps)))

    def one(exp: str) -> None:
        start = time.perf_counter()
        run_step(prof.experiment(exp), prof, out / exp, options, sealed_steps)
        times[exp] = round(time.perf_counter() - start, 1)
        log(f"[{exp}] after-sweep step done ({times[exp]:.0f} s)")

    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = [pool.submit(one, exp) for exp in steps]
        try:
            for future in futures:
                future.result()
        except BaseException as exc:
            for future in futures:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):
                with halted_pools():  # the steps' workers stop, so the threads end soon
                    pool.shutdown(wait=True)
            raise


def run_step(experiment, prof, out: Path, options: dict, sealed_steps: bool) -> None:
    """The experiment's step; with ``writes``, its payload sealed into ``out/<writes>``, not
    computed again while that is sound (``sealed_steps``: checksum required), else redone."""
    target = out / experiment.writes if experiment.writes else None
    if target is not None and target.exists():
        if sealed_problem(target, required=sealed_steps) is None:
            return
        set_aside_file(target)
    payload = experiment.load_step()(prof, out, options)
    if target is not None:
        atomic_write_json(target, sealed(payload), out)
