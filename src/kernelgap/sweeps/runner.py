"""Run a sweep: plan stacks, claim runs, train on an executor, write results.  Only the
driver touches the results folder; a run whose valid result exists is skipped, so a killed
sweep resumes where it stopped, and a corrupted result is renamed aside and redone.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..errors import ConfigError, KernelgapError
from ..limits import check_workers
from ..models.scorers import plan_pairs
from ..report.integrity import family_problems, foreign_records, sweep_file_problems, toml_problem
from ..task import ProductFamily
from ..training import RunConfig
from ..training.product import product_cost
from ..training.trainer import train_task
from ..training.two_candidate import training_family
from .config import load_sweep, sweep_source
from .executors import check_executor, executor_width, make_executor
from .store import ResultsDir, run_ids, set_aside_file

#: Most runs trained in one stack.
MAX_STACK = 64
#: Estimated costs of a training step in sequence slots (one scored (query, key) pair of one
#: member and head), measured by ``benchmarks/bench_stacks.py``; only their ratios matter,
#: and never to a result.  :data:`STEP_OVERHEAD`: a step's fixed cost; :data:`COLUMN_COST`
#: (set high: a padded stack trains until its last member stops) plus one
#: :data:`SLOT_COST`-th of a slot per pair-block entry: a member's feature column.
STEP_OVERHEAD = 60_000
COLUMN_COST = 30
SLOT_COST = 300


@dataclass(frozen=True)
class FamilyCost:
    """What one member costs per step on a family: ``slots`` (sequences × scored positions ×
    keys) and ``block`` (table entries per feature column)."""

    slots: int
    block: int

    @classmethod
    def of(cls, run: RunConfig) -> FamilyCost:
        family = training_family(run.family.load(), run.model)
        if isinstance(family, ProductFamily):  # trained as a product (training/product.py)
            return cls(*product_cost(family, run.model))
        positions = family.scored_positions
        _, position_dependent, causal = run.model.attention_shape
        key_positions = family.length if position_dependent else 1
        plan = plan_pairs(torch.as_tensor(family.index), positions, key_positions, causal)
        return cls(len(family) * len(positions) * family.length, plan.size * key_positions)


class StackCosts:
    """Estimated cost per step of stacks, in sequence slots (each family built once)."""

    def __init__(self) -> None:
        self.families: dict[str, FamilyCost] = {}

    def family(self, run: RunConfig) -> FamilyCost:
        key = json.dumps([run.family.model_dump(), *run.model.attention_shape[1:]], sort_keys=True)
        if key not in self.families:
            self.families[key] = FamilyCost.of(run)
        return self.families[key]

    def columns(self, run: RunConfig) -> int:
        """Feature columns of a member: ``H·r`` (a softmax model has no rank: ``H``)."""
        return run.model.attention_shape[0] * (run.model.stack_rank or 1)

    def padding(self, stack: list[RunConfig]) -> float:
        """Work spent on the padded feature columns of a stack (members padded to its largest rank)."""
        top = max(self.columns(r) for r in stack)
        return sum(top - self.columns(r) for r in stack) * self.column(stack[0])

    def column(self, run: RunConfig) -> float:
        return COLUMN_COST + self.family(run).block / SLOT_COST

    def step(self, stack: list[RunConfig]) -> float:
        """``STEP_OVERHEAD + Σ_members (heads × slots + largest H·r × column cost)``."""
        run, top = stack[0], max(self.columns(r) for r in stack)
        heads = run.model.attention_shape[0]
        return STEP_OVERHEAD + len(stack) * (heads * self.family(run).slots + top * self.column(run))

    def work(self, stack: list[RunConfig]) -> float:
        """Cost of a whole stack: its step cost times its schedule's steps."""
        run = stack[0]
        return self.step(stack) * (run.train.mse_steps + run.train.max_steps)


@dataclass
class SweepSummary:
    out: str
    total: int
    done_before: int
    ran: int
    skipped_locked: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)
    damage: dict[str, str] = field(default_factory=dict)
    wall_time_s: float = 0.0

    @property
    def left(self) -> int:
        return self.total - self.done_before - self.ran


def plan_tasks(
    runs: list[RunConfig], workers: int, max_stack: int = MAX_STACK, costs: StackCosts | None = None
) -> list[list[RunConfig]]:
    """Split runs into stacks: one stack key each, similar ranks together.

    Chunks of ``⌈runs / workers⌉`` (at most ``max_stack``) keep every worker busy; within
    one, a stack takes runs from the largest rank down while padding them to its largest
    rank costs at most a separate stack's :data:`STEP_OVERHEAD`.
    """
    if not runs:
        return []
    costs = costs or StackCosts()
    size = max(1, min(max_stack, math.ceil(len(runs) / max(workers, 1))))
    groups: dict[str, list[RunConfig]] = defaultdict(list)
    for run in runs:
        groups[run.stack_key()].append(run)
    tasks = []
    for members in groups.values():
        members.sort(key=lambda r: (-(r.model.stack_rank or 0), r.seed))
        chunks = math.ceil(len(members) / size)
        step = math.ceil(len(members) / chunks)
        for i in range(0, len(members), step):
            tasks += _padding_limited(members[i : i + step], costs)
    return tasks


def _padding_limited(members: list[RunConfig], costs: StackCosts) -> list[list[RunConfig]]:
    """Consecutive runs (ranks descending) cut where padding would cost more than a new stack."""
    out: list[list[RunConfig]] = []
    for run in members:
        if out and costs.padding(out[-1] + [run]) <= STEP_OVERHEAD:
            out[-1].append(run)
        else:
            out.append([run])
    return [sorted(s, key=lambda r: (r.model.stack_rank or 0, r.seed)) for s in out]


def longest_first(tasks: list, costs: StackCosts | None = None, stack=lambda task: task) -> list:
    """Tasks largest estimated work first, so no worker idles long at the end of a sweep."""
    costs = costs or StackCosts()
    return sorted(tasks, key=lambda task: costs.work(stack(task)), reverse=True)


def run_sweep(target: str | Path, out: str | Path | None = None, **options) -> SweepSummary:
    """Run every run of a sweep whose result is missing; write ``results.csv`` (:func:`run_sweeps`)."""
    (summary,) = run_sweeps([(target, out)], **options)
    return summary


def run_sweeps(
    sweeps: list[tuple[str | Path, str | Path | None]],
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    cpus: float = 1.0,
    gpus: float = 0.0,
    progress: bool | Callable[[str], None] = True,
    max_stack: int = MAX_STACK,
) -> list[SweepSummary]:
    """Several sweeps ``(target, out)`` on one pool, each opened and planned alone (so every
    number is what it would be alone), their tasks run longest first.  One summary each.
    ``progress``: a bar on stderr, or a callable given one line per finished task (where no
    terminal shows a bar)."""
    start = time.perf_counter()
    check_pool(executor, workers, cpus, gpus)
    opened: list[_Opened] = []
    try:
        for target, out in sweeps:
            opened.append(_open(target, out))
        try:
            if any(o.pending for o in opened):
                pool = make_executor(executor, workers=workers, address=address, cpus=cpus, gpus=gpus)
                _train_opened(opened, pool, executor_width(pool, workers), progress, max_stack)
        finally:
            for o in opened:
                o.store.write_csv(o.ids)
    except BaseException:
        for o in opened:
            if o.created:
                o.store.remove_if_unused()  # a refused sweep leaves no folder behind
        raise
    for o in opened:
        o.summary.wall_time_s = time.perf_counter() - start
    return [o.summary for o in opened]


def check_pool(executor: str, workers: int | None, cpus: float = 1.0, gpus: float = 0.0) -> None:
    """The pool's flags, checked by every command that trains before it opens a folder."""
    check_executor(executor)
    check_workers(workers)
    if not (math.isfinite(cpus) and cpus >= 0) or not (math.isfinite(gpus) and gpus >= 0):
        raise KernelgapError(f"--cpus-per-task and --gpus-per-task must be ≥ 0, got {cpus} and {gpus}")


@dataclass
class _Opened:
    """A sweep whose folder is open: its runs, what is left, its summary so far."""

    store: ResultsDir
    runs: list[RunConfig]
    ids: list[str]
    created: bool
    summary: SweepSummary | None = None
    pending: list[RunConfig] | None = None


def _open(target: str | Path, out: str | Path | None) -> _Opened:
    """Read a sweep, open (or resume) its folder, set corrupted results aside."""
    config_path, out_dir = sweep_source(target, out)
    store = ResultsDir(out_dir)
    resuming = config_path == out_dir / "sweep.toml"
    if resuming and (why := toml_problem(out_dir, store.meta())):  # read as `check` reads it
        raise ConfigError(f"{config_path} {why}; restore it, or run the sweep file with --out {out_dir}")
    sweep = load_sweep(config_path, store.family_copies() if resuming else None)
    runs = sweep.runs()
    ids = run_ids(runs)
    opened = _Opened(store, runs, ids, created=not _exists(out_dir))
    try:
        store.open_for(sweep.name, config_path.read_text(), ids, sweep.files.seen)
        if not resuming and sweep.files.seen:  # train from the folder's copies, never the originals
            sweep = load_sweep(config_path, store.family_copies())
            opened.runs = sweep.runs()
            if run_ids(opened.runs) != ids:
                raise ConfigError(
                    f"the family files of {config_path} changed while the sweep was being set up; run it again"
                )
        damaged: dict[str, str] = {}
        while found := store.damaged(ids):  # a record, or the checkpoint it names, not as written
            for run_id in found:  # (again: a checkpoint set aside takes its stack's records with it)
                store.set_aside(run_id)
            damaged |= found
        for name in foreign_records(store.root, store.meta()):  # never counted: set aside
            set_aside_file(store.runs_dir / name)
    except BaseException:
        if opened.created:
            store.remove_if_unused()
        raise
    opened.pending = [r for r, i in zip(opened.runs, ids) if store.read(i) is None]
    opened.summary = SweepSummary(
        str(out_dir), len(ids), len(ids) - len(opened.pending), 0, set_aside=list(damaged), damage=damaged
    )
    return opened


def _exists(path: Path) -> bool:
    """``path.exists()``; a path the system cannot look up counts as present (opening it says why)."""
    try:
        return path.exists()
    except OSError:
        return True


def _train_opened(opened: list[_Opened], pool, width: int, progress, max_stack: int) -> None:
    """Train what the opened sweeps miss on one pool.

    Stacks are planned over the *whole* sweep and every stack holding a pending run trains
    whole, writing only the runs claimed here: a resumed sweep trains exactly the stacks an
    uninterrupted one would, so its numbers are bitwise equal."""
    try:
        costs, tasks = StackCosts(), []
        for o in opened:
            todo = {id(r) for r in o.pending}
            tasks += [(o, t) for t in plan_tasks(o.runs, width, max_stack, costs) if any(id(r) in todo for r in t)]
        _drive(pool, width, longest_first(tasks, costs, stack=lambda task: task[1]), progress)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _drive(pool, width: int, tasks: list[tuple[_Opened, list[RunConfig]]], show) -> None:
    """Keep ``width`` tasks in flight; write each result as it returns (``show``: the bar, or a
    callable given a line per finished task)."""
    queue = list(reversed(tasks))
    in_flight: dict[Future, tuple[_Opened, list]] = {}
    failures: list[str] = []
    summaries = {id(o): o.summary for o, _ in tasks}
    total = sum(s.total for s in summaries.values())
    done = sum(s.done_before for s in summaries.values())
    bar = _progress(show is True)
    start = time.perf_counter()
    with bar:
        task_id = bar.add_task("runs", total=total, completed=done, left=total - done)
        try:
            while queue or in_flight:
                while queue and len(in_flight) < width:
                    opened, group = queue.pop()
                    store = opened.store
                    wanted = [r.run_id() for r in group if store.read(r.run_id()) is None]
                    claims = [c for c in (store.claim(i) for i in wanted) if c]
                    claimed = {c.run_id for c in claims}
                    opened.summary.skipped_locked += [i for i in wanted if i not in claimed and store.read(i) is None]
                    if claims:  # the whole stack trains; only the claimed runs are written
                        in_flight[pool.submit(train_task, group)] = (opened, claims)
                if not in_flight:
                    break
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    opened, claims = in_flight.pop(fut)
                    ran = _collect(fut, claims, opened.store, failures)
                    opened.summary.ran += ran
                    done += ran
                    bar.update(task_id, completed=done, left=total - done)
                    if callable(show) and ran:
                        show(f"sweep: {done}/{total} runs, {total - done} left ({time.perf_counter() - start:.0f} s)")
        finally:
            for opened, claims in in_flight.values():
                for claim in claims:
                    opened.store.release(claim, finished=False)
    if failures:
        raise KernelgapError(f"{len(failures)} task(s) failed; first: {failures[0]}")


def _collect(fut: Future, claims, store: ResultsDir, failures: list[str]) -> int:
    """Write a finished task's records and free its claims; returns runs written."""
    try:
        output = fut.result()
        records = output.records
    except Exception as exc:  # keep the sweep going, report at the end
        failures.append(_failure_line(exc))
        records = []
    claimed = {c.run_id for c in claims}
    mine = [r for r in records if r["id"] in claimed]
    if mine:  # the weights first: a record never names a checkpoint that is not there
        file = store.write_checkpoint(mine[0]["checkpoint"]["file"], output.checkpoint)
        check = {"file": file, "sha256": hashlib.sha256(output.checkpoint).hexdigest(), "bytes": len(output.checkpoint)}
        mine = [{**r, "checkpoint": {**r["checkpoint"], **check}} for r in mine]
    for record in mine:
        store.write(record)
    written = {r["id"] for r in mine}
    for claim in claims:
        store.release(claim, finished=claim.run_id in written)
    return len(mine)


def _failure_line(exc: BaseException) -> str:
    """One line for a failed task: a user error as its message, anything else with its type
    (Ray's wrapper gives way to the error it carries)."""
    exc = getattr(exc, "cause", None) or exc
    text = " ".join(str(exc).split())
    return text if isinstance(exc, KernelgapError) else f"{type(exc).__name__}: {text}"


def _progress(show: bool) -> Progress:
    return Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs · {task.fields[left]} left"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        disable=not show,
        console=Console(stderr=True),
    )


def sweep_status(target: str | Path) -> dict:
    """Done / left / corrupted / locked counts of a results folder and its damage, found as
    ``check`` finds it (read-only)."""
    store = ResultsDir(target)
    meta = store.meta()
    ids = meta.runs
    damaged = store.damaged(ids)
    done = [r for r in store.records(ids) if r["id"] not in damaged]
    return {
        "out": str(target),
        "name": meta.name,
        "total": len(ids),
        "done": len(done),
        "left": len(ids) - len(done),
        "corrupt": len(damaged),
        "damage": damaged,
        "family_damage": family_problems(store.root, meta),
        "file_damage": sweep_file_problems(store.root, meta),
        "exact": sum(1 for r in done if r["train"].get("exact")),
        "diverged": sum(1 for r in done if r["status"] == "diverged"),
        "lock_files": len(list(store.locks_dir.glob("*.lock"))),  # held, or left by a killed sweep: free to take
    }


def status_lines(s: dict) -> list[str]:
    return [
        f"{s['out']} ({s['name']}): {s['done']}/{s['total']} done, {s['left']} left, "
        f"{s['exact']} exact, {s['diverged']} diverged, {s['corrupt']} corrupted, "
        f"{s['lock_files']} lock files"
    ] + [
        f"corrupted: {why}"
        for why in [*s.get("damage", {}).values(), *s.get("family_damage", []), *s.get("file_damage", [])]
    ]


def summary_lines(s: dict) -> list[str]:
    lines = [
        f"{s['out']}: ran {s['ran']}, {s['done_before']} already done, {s['left']} left "
        f"of {s['total']} in {s['wall_time_s']:.1f}s; results.csv written"
    ]
    if s["skipped_locked"]:
        lines.append(f"{len(s['skipped_locked'])} runs are claimed by another sweep process")
    if s["set_aside"]:
        lines.append(f"{len(s['set_aside'])} corrupted result files renamed aside and redone")
        lines += [f"  {why}" for why in s.get("damage", {}).values()]
    return lines
