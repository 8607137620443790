"""Train a user's module on the witness and OOD suites and write ``probe.json``."""

from __future__ import annotations

import json
import time
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import torch

from .. import __version__
from ..errors import KernelgapError
from ..io import atomic_write_json
from ..training import FamilySpec, TrainConfig
from ..training.config import config_hash
from ..sweeps.executors import local_executor
from ..training.trainer import Scored, StackTrainer, configure_worker
from .interface import D_MODEL, ProbeAdapter, _one_line, build_module, check_interface, load_target

#: Learning rate of probed modules (the calibrated rate of every non-table map, SPEC §7).
PROBE_LR = 3e-3


@dataclass
class ProbeSuite:
    """One family (and optional disjoint test family), the ranks and seeds to train."""

    label: str
    family: FamilySpec
    ranks: list[int]
    seeds: list[int]
    train: TrainConfig
    test_family: FamilySpec | None = None


def _witness(ranks, seeds, mse=1000, steps=2000) -> ProbeSuite:
    return ProbeSuite("witness", FamilySpec("witness"), ranks, seeds,
                      TrainConfig(lr=PROBE_LR, mse_steps=mse, max_steps=steps))


def _ood(n, ranks, seeds, q=8, mse=700, steps=1400) -> ProbeSuite:
    params = {"n": n, "queries_per_class": q}
    return ProbeSuite(f"ood n={n}", FamilySpec("ood", {**params, "split": "train"}), ranks, seeds,
                      TrainConfig(lr=PROBE_LR, mse_steps=mse, max_steps=steps, stop_below=None),
                      FamilySpec("ood", {**params, "split": "test"}))


#: The probe's suites per profile (``quick``: under a minute for a small module on 2 cores).
PROFILES: dict[str, list[ProbeSuite]] = {
    "quick": [_witness([32], [0]), _ood(4, [8], [0])],
    "paper": [_witness([1, 2, 4, 8, 12, 16, 24, 32, 64, 128, 256], [0, 1, 2]),
              _ood(8, [2, 4, 8, 16, 32, 64, 128], [0, 1])],
}


def _suites(profile: str, ranks: list[int] | None, seeds: list[int] | None,
            steps: int | None) -> list[ProbeSuite]:
    if profile not in PROFILES:
        raise KernelgapError(f"unknown probe profile {profile!r}; choose from {', '.join(PROFILES)}")
    if steps is not None and steps < 0:
        raise KernelgapError(f"--steps must be ≥ 0, got {steps}")
    out = []
    for suite in PROFILES[profile]:
        s = replace(suite, ranks=list(ranks or suite.ranks), seeds=list(seeds or suite.seeds))
        if steps is not None:
            s.train = replace(s.train, mse_steps=steps // 3, max_steps=steps - steps // 3)
        out.append(s)
    if any(r < 1 for s in out for r in s.ranks):
        raise KernelgapError("probe ranks must be ≥ 1")
    return out


def run_probe(target: str, kwargs: dict | None = None, out: str | Path | None = None,
              profile: str = "quick", ranks: list[int] | None = None, seeds: list[int] | None = None,
              steps: int | None = None, d_model: int = D_MODEL, report: bool = False,
              log=print, workers: int = 1) -> dict:
    """Probe ``target`` (``pkg.mod:Class`` or ``file.py:Class``); returns the ``probe.json`` payload.

    ``ranks``, ``seeds``, ``steps`` (total per run) override the profile's
    suites.  With ``out`` the payload is written to ``out/probe.json``; with
    ``report`` also ``summary.json``, figures and ``report.html`` there.
    ``workers > 1`` trains the runs in that many processes.
    """
    kwargs = dict(kwargs or {})
    if d_model < 1:
        raise KernelgapError(f"--d-model must be ≥ 1, got {d_model}")
    if workers < 1:
        raise KernelgapError(f"--workers must be ≥ 1, got {workers}")
    suites = _suites(profile, ranks, seeds, steps)
    cls = load_target(target)
    ms = {_family(suite.family).m for suite in suites}
    interface = None
    for m in sorted(ms):  # the interface is checked for every token width before any training
        interface = check_interface(cls, m, kwargs, d_model)
    suite_rows = [{"label": s.label, "family": asdict(s.family),
                   "test_family": asdict(s.test_family) if s.test_family else None,
                   "ranks": s.ranks, "seeds": s.seeds, "train": asdict(s.train)} for s in suites]
    fingerprint = config_hash({"target": _target_name(target), "kwargs": kwargs,
                               "d_model": d_model, "suites": suite_rows})
    out = Path(out) if out is not None else None
    store = ProbeStore(out, fingerprint) if out is not None else None
    payload = store.complete() if store else None
    if payload is not None:
        log(f"[probe] {store.final} holds this probe already; nothing to train")
    else:
        payload = _probe(cls, target, kwargs, interface, d_model, profile, suites, suite_rows,
                         fingerprint, store, log, workers)
    if store and report:
        from ..report.beyond import write_probe_report

        write_probe_report(payload, out, log=log)
    return payload


def _probe(cls, target, kwargs, interface, d_model, profile, suites, suite_rows,
           fingerprint, store, log, workers: int = 1) -> dict:
    """Train every (suite, rank, seed) not finished in ``store``; the ``probe.json`` payload.

    With ``workers > 1`` the runs train in a process pool (each run is seeded on its
    own, so the records do not depend on how they were scheduled).
    """
    done = store.finished() if store else {}
    keys = [(s.label, rank, seed) for s in suites for rank in s.ranks for seed in s.seeds]
    by_label = {s.label: s for s in suites}
    pending = [k for k in keys if k not in done]
    finished = dict(done)
    threads = torch.get_num_threads()
    configure_worker()
    start = time.perf_counter()
    for key in keys:
        if key in done:
            _log_run(log, key, done[key], "reused")
    tasks = {(label, rank, seed): (kwargs, by_label[label], rank, seed, d_model)
             for label, rank, seed in pending}
    try:
        for key, rec in _trained(tasks, workers, cls, target):
            finished[key] = rec
            if store:
                store.save_partial([finished[k] for k in keys if k in finished])
            _log_run(log, key, rec, "trained")
    finally:
        torch.set_num_threads(threads)
    payload = {"target": target, "class": cls.__name__, "kwargs": kwargs, "interface": interface,
               "d_model": d_model if interface == "layer" else None, "profile": profile,
               "version": __version__, "fingerprint": fingerprint,
               "wall_time_s": round(time.perf_counter() - start, 1),
               "suites": suite_rows, "runs": [finished[k] for k in keys]}
    if store:
        store.finish(payload)
    return payload


def _trained(tasks: dict[tuple, tuple], workers: int, cls: type, target: str):
    """``(key, record)`` of every task as it finishes: here, or in a pool of ``workers``."""
    if workers == 1 or len(tasks) < 2:
        for key, args in tasks.items():
            yield key, _run_task(cls, *args)
        return
    pool = local_executor(workers)
    try:
        futures = {pool.submit(_pool_task, target, *args): key for key, args in tasks.items()}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _log_run(log, key: tuple, rec: dict, how: str) -> None:
    label, rank, seed = key
    log(f"[probe] {label} rank {rank} seed {seed} ({how}): train max error {rec['train']['max_error']:.3f}"
        + (f", test exact-seq acc {rec['test']['exact_seq_acc']:.3f}" if rec["test"] else ""))


def _family(spec: FamilySpec):
    """The family of a spec, built once per process."""
    return _built_family(json.dumps(asdict(spec), sort_keys=True))


@lru_cache(maxsize=8)
def _built_family(spec_json: str):
    return FamilySpec(**json.loads(spec_json)).build()


def _run_task(cls: type, kwargs: dict, suite: ProbeSuite, rank: int, seed: int, d_model: int) -> dict:
    """One probe run on the suite's families (built once per process)."""
    fam = _family(suite.family)
    test = _family(suite.test_family) if suite.test_family else None
    return _train_one(cls, kwargs, suite, fam, test, rank, seed, d_model)


def _pool_task(target: str, *args) -> dict:
    """One probe run in a pool worker: set the worker up, import the module by name, train."""
    configure_worker()
    return _run_task(load_target(target), *args)


def _target_name(target: str) -> str:
    """``file.py:Class`` or ``pkg.mod:Class`` without the folder (a probe's identity)."""
    module, _, cls = target.rpartition(":")
    return f"{Path(module).name}:{cls}"


class ProbeStore:
    """``out/probe.json`` and, while a probe runs, ``out/probe.partial.json``.

    Every finished run is saved at once, so an interrupted probe resumes where it
    stopped; a folder holding a probe of another module or other settings (a
    different fingerprint) is refused rather than overwritten.
    """

    def __init__(self, out: Path, fingerprint: str) -> None:
        self.out, self.fingerprint = out, fingerprint
        self.final, self.partial = out / "probe.json", out / "probe.partial.json"
        self.stored = {path: self._read(path) for path in (self.final, self.partial)}
        for path, stored in self.stored.items():
            if stored is not None and stored.get("fingerprint") != fingerprint:
                raise KernelgapError(f"{path} holds a probe of another module or other settings; "
                                     "choose another --out")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KernelgapError(f"cannot write to --out {out}: {exc.strerror}") from None

    @staticmethod
    def _read(path: Path) -> dict | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            raise KernelgapError(f"{path} is corrupted (not valid JSON); move it aside or choose "
                                 "another --out") from None
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise KernelgapError(f"{path} is not a probe result; move it aside or choose another --out")
        return data

    def complete(self) -> dict | None:
        """The finished probe's payload, if this folder held one when opened."""
        return self.stored[self.final]

    def finished(self) -> dict[tuple, dict]:
        """Runs of an interrupted probe, keyed by ``(suite label, rank, seed)``."""
        data = self.stored[self.partial] or {"runs": []}
        return {(r["suite"], r["rank"], r["seed"]): r for r in data["runs"]}

    def save_partial(self, runs: list[dict]) -> None:
        atomic_write_json(self.partial, {"fingerprint": self.fingerprint, "runs": runs})

    def finish(self, payload: dict) -> None:
        atomic_write_json(self.final, payload)
        self.partial.unlink(missing_ok=True)


def _train_one(cls, kwargs, suite: ProbeSuite, fam, test, rank: int, seed: int, d_model: int) -> dict:
    module = build_module(cls, fam.m, rank, kwargs, seed, d_model)
    adapter = ProbeAdapter(module).float()
    trainer = StackTrainer(adapter, Scored.of(fam, torch.float32), suite.train,
                           Scored.of(test, torch.float32) if test is not None else None)
    try:
        (res,) = trainer.run()
    except KernelgapError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module failed mid-training
        raise KernelgapError(f"{cls.__name__} failed while training ({suite.label}, rank {rank}): "
                             f"{type(exc).__name__}: {_one_line(exc)}") from None
    return {"suite": suite.label, "rank": rank, "seed": seed, "status": res.status,
            "steps": res.steps, "wall_time_s": round(res.wall_time_s, 2),
            "parameters": sum(p.numel() for p in adapter.parameters()),
            "train": res.train, "test": res.test}


