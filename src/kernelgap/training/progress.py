"""Progress of a training run as it goes: what the trainer tells an observer, and a live
terminal view of it.

An observer is any callable taking a :class:`TrainingProgress`.  The trainer calls it once
per point of its training curve, read in the same transfer as the stop marks (so observing
adds no synchronisation and changes no number), and once at the end (``done``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

REFRESH_PER_SECOND = 4


@dataclass(frozen=True)
class TrainingProgress:
    """Where a stack's training is: ``step`` of ``total``, the ``phase`` (``mse`` or ``max``),
    each member's max error and loss (None where not finite), the members still training;
    ``done``: the last report, with each member's recorded max error and final loss."""

    step: int
    total: int
    phase: str
    max_error: tuple[float | None, ...]
    loss: tuple[float | None, ...]
    left: int
    done: bool = False


Observer = Callable[[TrainingProgress], None]


def phase_of(step: int, mse_steps: int) -> str:
    return "mse" if step < mse_steps else "max"


def staged(observer: Observer | None, stage: str) -> Observer | None:
    """``observer`` told of a first stage trained before the run (a wide table, a teacher): its
    phase prefixed with ``stage``, its end one more point, not the run's end."""
    if observer is None:
        return None

    def tell(progress: TrainingProgress) -> None:
        phase = f"{stage} {'done' if progress.done else progress.phase}"
        observer(dataclasses.replace(progress, phase=phase, done=False))

    return tell


def _finite(values: Sequence[float | None]) -> tuple[float | None, ...]:
    return tuple(v if v is not None and math.isfinite(v) else None for v in values)


def at_point(step: int, cfg, max_errors, losses, left: int) -> TrainingProgress:
    """The progress at a curve point of a run trained with ``cfg``."""
    total = cfg.mse_steps + cfg.max_steps
    return TrainingProgress(step, total, phase_of(step, cfg.mse_steps), _finite(max_errors), _finite(losses), left)


def finished(results, cfg) -> TrainingProgress:
    """The last progress: each member's recorded max error and the loss of its final errors."""
    last = max((r.steps for r in results), default=0)
    return TrainingProgress(
        last,
        cfg.mse_steps + cfg.max_steps,
        phase_of(max(last - 1, 0), cfg.mse_steps),
        _finite([r.train.get("max_error") for r in results]),
        _finite([(r.curve or {}).get("final", {}).get("loss") for r in results]),
        0,
        done=True,
    )


def number(values: tuple[float | None, ...]) -> str:
    """One member's value, or the smallest of a stack's; ``—`` where none is finite."""
    finite = [v for v in values if v is not None]
    if not finite:
        return "—"
    best = f"{min(finite):.4g}"
    return best if len(values) == 1 else f"best {best} of {len(values)}"


class TerminalProgress:
    """A rich bar on ``console`` (the phase, step of total, loss, max error, elapsed time): a
    context manager and the observer."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold]train[/bold] {task.fields[phase]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps · loss {task.fields[loss]} · max error {task.fields[max_error]}"),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=REFRESH_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.task = None

    def __enter__(self) -> TerminalProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def __call__(self, progress: TrainingProgress) -> None:
        fields = {
            "phase": "done" if progress.done else progress.phase,
            "loss": number(progress.loss),
            "max_error": number(progress.max_error),
        }
        if self.task is None:
            self.task = self.bar.add_task("train", total=progress.total, **fields)
        # a first stage (:func:`staged`) and the run after it have schedules of their own
        self.bar.update(self.task, total=progress.total, completed=progress.step, **fields)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


@contextlib.contextmanager
def watch(stream: TextIO | None) -> Iterator[Observer | None]:
    """A :class:`TerminalProgress` on ``stream`` where it is a terminal; None otherwise."""
    if not _is_terminal(stream):
        yield None
        return
    from rich.console import Console

    with TerminalProgress(Console(file=stream)) as view:
        yield view
