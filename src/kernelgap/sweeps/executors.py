"""Executors: where stacks of runs train, each a :class:`concurrent.futures.Executor` made
by name from :data:`EXECUTORS` (another engine plugs in with one entry).  A task is a stack
of runs, never one run: a fresh worker spends seconds importing torch.  Workers only
compute, the driver writes every result, and a worker ends with its driver (:func:`watch_driver`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextvars import ContextVar

from ..errors import KernelgapError
from ..models.leash import StepOverrun, StepWatch

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    """Have Linux send ``SIGKILL`` to this process when the thread that forked it exits
    (``prctl(PR_SET_PDEATHSIG)``, delivered whether or not the parent is reaped); exit now
    if the parent died before that was armed.  Off Linux, or without ``prctl``: nothing."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        args = [ctypes.c_ulong(v) for v in (signal.SIGKILL, 0, 0, 0)]
        armed = ctypes.CDLL(None, use_errno=True).prctl(ctypes.c_int(_PR_SET_PDEATHSIG), *args) == 0
    except (OSError, AttributeError):
        return
    if armed and os.getppid() != parent:
        os._exit(1)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, ``None`` when ``/proc``
    cannot say; :class:`FileNotFoundError` for no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            raise
        return None
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields if len(fields) > 19 else None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (``None`` without ``/proc``): it tells a reused pid."""
    try:
        fields = _proc_stat(pid)
    except FileNotFoundError:
        return None
    return int(fields[19]) if fields else None


def driver_gone(driver: int, started: int | None = None) -> bool:
    """Whether process ``driver`` (started at ``started``, if known) has exited.  A zombie
    counts as gone, so ``/proc`` state ``Z``/``X`` or another start time (a reused pid) is
    read where it exists; else ``os.kill(pid, 0)``, which cannot see zombies."""
    try:
        fields = _proc_stat(driver)
    except FileNotFoundError:
        return True
    if fields is not None:
        return fields[0] in ("Z", "X") or (started is not None and int(fields[19]) != started)
    try:
        os.kill(driver, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid reused by another user
        return True
    return False


def kill(process) -> None:
    """Kill a process, whatever state it is in (already gone, never started)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        process.kill()


def exit_now(status: int) -> None:
    """Kill this process's children and end it with ``status`` at once."""
    for child in multiprocessing.active_children():
        kill(child)
    os._exit(status)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (non-Linux)
        return os.cpu_count() or 1


def local_executor(workers: int | None = None, **_: object) -> Executor:
    """A process pool, one worker per core by default (``forkserver``, torch preloaded).  A
    driver killed with ``-9`` leaves no process behind (:func:`watch_driver`); it kills a
    worker whose module's forward pass overruns :data:`STEP_LIMIT`."""
    if _HALTED.is_set():
        raise WorkerDied("interrupted: no pool starts now")
    seconds, context = STEP_LIMIT.get(), forkserver_context()  # the forkserver before the watch's thread
    watch = None if seconds is None else StepWatch(seconds)
    return LocalPool(
        max_workers=workers or available_cores(),
        mp_context=context,
        initializer=watch_driver,
        initargs=(os.getpid(), process_start(os.getpid()), seconds, watch and watch.folder),
        watch=watch,
    )


def forkserver_context():
    """The ``forkserver`` context, its server started from the main thread where possible."""
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    preload = ["kernelgap.training.trainer"]  # torch and the trainer, imported once for every worker
    if threading.current_thread() is threading.main_thread():
        # Preloading this module arms the forkserver's parent-death signal, which follows the
        # forking thread (a restart from another thread is left unarmed).  It starts with
        # SIGINT ignored, as its workers: a Ctrl-C reaches the whole group; the driver answers.
        ctx.set_forkserver_preload([__name__, *preload])
        with _sigint_held():
            try:
                forkserver.ensure_running()
            finally:
                ctx.set_forkserver_preload(preload)
    else:
        ctx.set_forkserver_preload(preload)
    return ctx


@contextlib.contextmanager
def _sigint_held():
    """Meanwhile SIGINT is ignored (processes started meanwhile inherit that) and blocked (so
    a Ctrl-C meanwhile stays pending for this process's handler).  The resource tracker
    starts first: its start unblocks SIGINT."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    answer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, answer)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


#: Seconds a pool worker gives one forward pass of a module written elsewhere (None: no limit).
STEP_LIMIT: ContextVar[float | None] = ContextVar("kernelgap_step_limit", default=600.0)


@contextlib.contextmanager
def step_limit(seconds: float | None):
    """Pools made meanwhile hold each module forward pass of their workers to ``seconds``."""
    token = STEP_LIMIT.set(seconds)
    try:
        yield
    finally:
        STEP_LIMIT.reset(token)


class WorkerDied(KernelgapError):
    """A pool worker ended while it ran a task (killed, or an exit from C code)."""


#: Seconds the workers of a pool shut down have to exit (a module's thread may never end).
WORKER_EXIT_S = 5.0


def _reap(processes: list, manager: threading.Thread | None, tasks: list[Future]) -> None:
    """Once ``tasks`` are done, give the workers :data:`WORKER_EXIT_S` to exit, then kill them."""
    wait(tasks)
    deadline = time.monotonic() + WORKER_EXIT_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.exitcode is None:
            kill(process)
    if manager is not None:
        manager.join()


class LocalPool(ProcessPoolExecutor):
    """A process pool whose ``shutdown(wait=False)`` kills the busy workers (no worker may
    train on after its driver failed or was interrupted; the standard pool lets them
    finish), and whose ``shutdown(wait=True)`` gives them :data:`WORKER_EXIT_S` to exit.  A
    task whose worker died is one line (:class:`WorkerDied`, or the step limit's)."""

    def __init__(self, *args, watch: StepWatch | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.watch = watch
        if watch is not None:
            watch.workers = lambda: getattr(self, "_processes", None)
        _POOLS.add(self)

    def processes(self) -> list:
        return list((getattr(self, "_processes", None) or {}).values())

    def stop_busy(self) -> None:
        """Kill the workers while tasks are in flight (none left training)."""
        if getattr(self, "_pending_work_items", None):
            for process in self.processes():
                kill(process)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if not wait:
            self.stop_busy()
        processes = self.processes()
        manager = getattr(self, "_executor_manager_thread", None)
        tasks = [item.future for item in list(getattr(self, "_pending_work_items", {}).values())]
        super().shutdown(wait=False, cancel_futures=cancel_futures)
        if wait:  # the tasks in flight finish first, as the standard pool's
            _reap(processes, manager, tasks)
        else:  # still bounded: the exit of this process waits for the pool's threads
            threading.Thread(target=_reap, args=(processes, None, []), name="kernelgap-reap", daemon=True).start()
        if self.watch is not None:
            self.watch.close()

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        """As the standard pool, but a broken pool or a worker that died is one line."""
        try:
            if _HALTED.is_set():
                raise BrokenProcessPool("interrupted")
            inner = super().submit(fn, *args, **kwargs)
        except BrokenProcessPool:
            inner = Future()
            inner.set_exception(BrokenProcessPool())
        outer: Future = Future()

        def settle(done: Future) -> None:
            if done.cancelled():
                outer.set_exception(CancelledError())
                return
            exc = done.exception()
            if isinstance(exc, BrokenProcessPool) and self.watch is not None and self.watch.overrun:
                exc = StepOverrun(self.watch.overrun)
            elif isinstance(exc, BrokenProcessPool):
                exc = WorkerDied(
                    f"a worker process ended abruptly (killed, or an exit from C code) while running "
                    f"{getattr(fn, '__name__', 'a task')}; its runs were not written"
                )
            if exc is None:
                outer.set_result(done.result())
            else:
                outer.set_exception(exc)

        outer.set_running_or_notify_cancel()
        inner.add_done_callback(settle)
        return outer


#: The local pools of this process, for :func:`halted_pools`.
_POOLS: weakref.WeakSet[LocalPool] = weakref.WeakSet()
_HALTED = threading.Event()


#: Seconds an interrupted command may spend on its clean-up (joining the threads that wait
#: on pool workers) before the process ends anyway.
INTERRUPT_GRACE_S = 15.0


def end_interrupted(status: int, bounded: bool, seconds: float = INTERRUPT_GRACE_S) -> None:
    """After Ctrl-C, in a process about to exit with ``status``: every local pool's busy
    workers stop now.  ``bounded`` (the command line's own process): a second Ctrl-C is
    ignored, and a clean-up still waiting after ``seconds`` is cut short (:func:`exit_now`).
    Results are written atomically, so nothing finished is lost; an interrupt never hangs."""
    for pool in list(_POOLS):
        pool.stop_busy()
    if not bounded:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    timer = threading.Timer(seconds, exit_now, (status,))
    timer.daemon = True
    timer.start()


@contextlib.contextmanager
def halted_pools():
    """Meanwhile every local pool stops its busy workers and takes no new task, and no pool
    starts: after an interrupt, the pools other threads drive stop too."""
    _HALTED.set()
    try:
        for pool in list(_POOLS):
            pool.stop_busy()
        yield
    finally:
        _HALTED.clear()


#: Seconds between a worker's checks that its driver is alive.
DRIVER_CHECK_S = 1.0

_FORKSERVER_COMMAND = "from multiprocessing.forkserver import main;"


def watch_driver(
    driver: int, started: int | None = None, step_seconds: float | None = None, board: str | None = None
) -> None:
    """Pool-worker initializer: end this process as soon as process ``driver`` has exited,
    even as a zombie (which still answers ``os.kill(pid, 0)``).

    * Parent-death signal (Linux): the driver's forkserver (preloading this module) and its
      workers each die with their parent (:func:`die_with_parent`).  The signal follows the
      forking *thread*: only a forkserver started from the driver's main thread is armed,
      and a worker the driver forks itself is not.
    * Polling, everywhere: a daemon thread checks :func:`driver_gone` every
      :data:`DRIVER_CHECK_S` seconds; the forkserver exits with its last worker.

    A worker ignores ``SIGINT`` (the driver answers it).  ``step_seconds``: the limit of a
    module's forward pass, posted to the driver's watch in the folder ``board``.
    """
    if os.getppid() != driver:
        die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if step_seconds is not None:
        from ..models.leash import arm_step_limit

        arm_step_limit(step_seconds, board)
    if driver_gone(driver, started):
        os._exit(1)

    hard_exit = os._exit  # a module's call is refused meanwhile (the step limit), never this one

    def watch() -> None:
        while not driver_gone(driver, started):
            time.sleep(DRIVER_CHECK_S)
        hard_exit(1)

    threading.Thread(target=watch, name="kernelgap-driver-watch", daemon=True).start()


def _arm_forkserver() -> None:
    """In a forkserver that preloads this module (:func:`forkserver_context`): die with the driver."""
    argv = getattr(sys, "orig_argv", [])
    if argv[-2:-1] == ["-c"] and argv[-1].startswith(_FORKSERVER_COMMAND) and repr(__name__) in argv[-1]:
        die_with_parent()


class InlineExecutor(Executor):
    """Runs each task in the calling process at ``submit`` (debugging, tests), in the
    folder it was given in (a module's ``os.chdir`` moves no relative path of the caller)."""

    workers = 1

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        future: Future = Future()
        here = os.getcwd()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        finally:
            os.chdir(here)
        return future


class RayExecutor(Executor):
    """Ray tasks of ``cpus``/``gpus`` (fractions allowed) each; ``address=None`` starts Ray locally."""

    def __init__(
        self, workers: int | None = None, address: str | None = None, cpus: float = 1.0, gpus: float = 0.0, **_: object
    ) -> None:
        try:
            import ray
        except ImportError:
            raise KernelgapError("the ray executor needs Ray: pip install 'kernelgap[ray]' (ray==2.58.0)") from None
        self._ray = ray
        # Ray prints to standard output whatever log_to_driver says: while it is up, file
        # descriptor 1 goes to standard error, so --json output printed after the work parses
        self._quiet = contextlib.ExitStack()
        self._quiet.enter_context(stdout_to_stderr())
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level="WARNING",
                ignore_reinit_error=True,
            )
            self._task = ray.remote(num_cpus=cpus, num_gpus=gpus)(_call)
            self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1) // max(cpus, 1e-9)))
        except BaseException as exc:  # a half-built executor leaves standard output as it was
            self._quiet.close()
            if not isinstance(exc, (ConnectionError, RuntimeError, ValueError)):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KernelgapError(f"cannot connect to Ray at {address or 'a new local instance'}: {first}") from None

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        return self._task.remote(fn, *args, **kwargs).future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            self._ray.shutdown()
        finally:
            self._quiet.close()


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


#: Executor factories by name: ``factory(workers=…, address=…, cpus=…, gpus=…)``.
EXECUTORS: dict[str, Callable[..., Executor]] = {
    "local": local_executor,
    "ray": RayExecutor,
    "inline": lambda **_: InlineExecutor(),
}


def check_executor(name: str) -> None:
    if name not in EXECUTORS:
        raise KernelgapError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")


def make_executor(name: str, **options) -> Executor:
    check_executor(name)
    return EXECUTORS[name](**options)


def executor_width(executor: Executor, requested: int | None) -> int:
    """How many tasks to keep in flight."""
    return requested or getattr(executor, "workers", None) or getattr(executor, "_max_workers", available_cores())


_arm_forkserver()
