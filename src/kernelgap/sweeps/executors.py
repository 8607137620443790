"""Executors: where stacks of runs train.

Each is a :class:`concurrent.futures.Executor` (``submit(fn, *args) → Future``,
``shutdown``), made by name from :data:`EXECUTORS`, so other engines (e.g.
Dask's ``get_executor()``) plug in with one entry.  A task is one group of
stackable runs — never one run — because a fresh worker spends seconds
importing torch.  Workers only compute; the driver writes every result.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor

from ..errors import KernelgapError


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (non-Linux)
        return os.cpu_count() or 1


def local_executor(workers: int | None = None, **_: object) -> Executor:
    """A process pool, one worker per core by default (``forkserver``, torch preloaded).

    Each worker watches the driver and exits when it is gone, so a driver killed
    with ``-9`` leaves no worker behind (nor the forkserver and resource tracker,
    which exit once no worker holds their pipes).
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["kernelgap.training"])
    return ProcessPoolExecutor(max_workers=workers or available_cores(), mp_context=ctx,
                               initializer=watch_driver, initargs=(os.getpid(),))


#: Seconds between a worker's checks that its driver is alive.
DRIVER_CHECK_S = 1.0


def watch_driver(driver: int) -> None:
    """Start a daemon thread that ends this process as soon as process ``driver`` is gone."""
    def watch() -> None:
        while True:
            try:
                os.kill(driver, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # the pid was reused by another user's process
                os._exit(1)
            time.sleep(DRIVER_CHECK_S)

    threading.Thread(target=watch, name="kernelgap-driver-watch", daemon=True).start()


class InlineExecutor(Executor):
    """Runs each task in the calling process at ``submit`` (debugging, tests)."""

    workers = 1

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future


def inline_executor(**_: object) -> Executor:
    return InlineExecutor()


class RayExecutor(Executor):
    """Ray tasks of ``cpus``/``gpus`` (fractions allowed) each; ``address=None`` starts Ray locally."""

    def __init__(self, workers: int | None = None, address: str | None = None,
                 cpus: float = 1.0, gpus: float = 0.0) -> None:
        try:
            import ray
        except ImportError:
            raise KernelgapError(
                "the ray executor needs Ray: pip install 'kernelgap[ray]' (ray==2.58.0)"
            ) from None
        self._ray = ray
        try:
            with stdout_to_stderr():  # Ray's start-up lines never mix with --json output
                ray.init(address=address, include_dashboard=False, log_to_driver=False,
                         logging_level="WARNING", ignore_reinit_error=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KernelgapError(f"cannot connect to Ray at {address or 'a new local instance'}: {first}") from None
        self._task = ray.remote(num_cpus=cpus, num_gpus=gpus)(_call)
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1) // max(cpus, 1e-9)))

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        return self._task.remote(fn, *args, **kwargs).future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._ray.shutdown()


@contextlib.contextmanager
def stdout_to_stderr():
    """Send everything written to file descriptor 1 (Python and C alike) to 2 meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _call(fn: Callable, *args, **kwargs):
    return fn(*args, **kwargs)


def ray_executor(workers: int | None = None, address: str | None = None,
                 cpus: float = 1.0, gpus: float = 0.0, **_: object) -> Executor:
    return RayExecutor(workers, address, cpus, gpus)


#: Executor factories by name: ``factory(workers=…, address=…, cpus=…, gpus=…)``.
EXECUTORS: dict[str, Callable[..., Executor]] = {
    "local": local_executor, "ray": ray_executor, "inline": inline_executor,
}


def check_executor(name: str) -> None:
    if name not in EXECUTORS:
        raise KernelgapError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")


def make_executor(name: str, **options) -> Executor:
    check_executor(name)
    return EXECUTORS[name](**options)


def executor_width(executor: Executor, requested: int | None) -> int:
    """How many tasks to keep in flight."""
    return requested or getattr(executor, "workers", None) or getattr(executor, "_max_workers", None) or available_cores()
