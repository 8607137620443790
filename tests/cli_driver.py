"""A pre-imported command line for tests that check only a command's output and exit status.

A server process imports torch, the trainer and the command line once (no torch operation:
it starts no thread beyond the idle one torch's import starts, as the pool's forkserver
forks after the same import) and, per request, forks a supervisor that forks
the command: the command's process gets the request's working folder, environment and
standard streams (passed as file descriptors), a session of its own, Python's own signal
handlers, and runs ``kernelgap.cli.main()`` as the console script does, then exits as the
interpreter would (non-daemon threads joined, exit handlers run, streams flushed).  The supervisor reports the command's
pid, then its status as ``subprocess`` gives it (negative: the signal that ended it).

Tests about processes themselves (signals, process groups, kills, the console script, what a
fresh interpreter imports) start real subprocesses instead.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def serve(address: str) -> None:
    """Answer requests on the Unix socket ``address`` until killed."""
    import torch  # noqa: F401 - the cost every fresh command pays, paid once here

    native = len(os.listdir("/proc/self/task"))  # the idle thread torch's import starts, as in a forkserver
    import kernelgap.cli  # noqa: F401
    import kernelgap.training.trainer  # noqa: F401

    threads = len(os.listdir("/proc/self/task"))
    assert threads == native and threading.active_count() == 1, f"{threads} threads before forking"
    gc.freeze()  # the commands' collections leave the server's objects (and pages) alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _supervise(conn)
        conn.close()
        while _reap():
            pass


def _command() -> None:
    """``main()`` as the console script runs it, then the interpreter's exit less the
    teardown of its modules (seconds in a forked copy of torch, all of it unobservable)."""
    from kernelgap.cli import main

    code, killed = 0, False
    try:
        main()
    except SystemExit as exc:
        code = exc.code & 0xFF if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:  # the interpreter ends by the signal itself
        traceback.print_exc()
        killed = True
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        traceback.print_exc()
        code = 1
    threading._shutdown()  # non-daemon threads, as the interpreter joins them
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if killed:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _reap() -> bool:
    try:
        return os.waitpid(-1, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return False


def _supervise(conn: socket.socket) -> None:
    """Fork the command and report its pid and status; there set it up and run it."""
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(msg)
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.argv = ["kernelgap", *request["argv"]]
        _command()
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    conn.close()
    os._exit(0)


SERVER = "import sys; sys.path[:0] = sys.argv[2:]; import cli_driver; cli_driver.serve(sys.argv[1])"


class Driver:
    """The client: :meth:`run` is ``subprocess.run([kernelgap, *argv], capture_output=True,
    text=True)`` from ``cwd`` with ``env``, through the pre-imported server."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="kgdriver", dir="/tmp")  # a short path: sockets' limit
        self.address = os.path.join(self.folder, "driver.sock")
        env = {**os.environ, "PYTHONPATH": SRC}
        self.server = subprocess.Popen(
            [sys.executable, "-c", SERVER, self.address, SRC, str(Path(__file__).parent)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.server.stdout.readline().strip() == "ready", "the driver did not start"

    def run(self, argv, cwd=None, env=None, timeout: float = 600) -> subprocess.CompletedProcess:
        argv = [str(a) for a in argv]
        request = {"argv": argv, "cwd": str(cwd or os.getcwd()), "env": dict(env if env is not None else os.environ)}
        with (
            open(os.devnull) as stdin,
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
        ):
            conn.connect(self.address)
            socket.send_fds(conn, [json.dumps(request).encode()], [stdin.fileno(), out.fileno(), err.fileno()])
            conn.settimeout(timeout)
            reply, pid = conn.makefile(), None
            try:
                pid = int(reply.readline())
                code = int(reply.readline())
            except TimeoutError:
                if pid is not None:
                    os.killpg(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(["kernelgap", *argv], timeout) from None
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
        done = subprocess.CompletedProcess(["kernelgap", *argv], code, stdout, stderr)
        done.pid = pid  # the command's process
        return done

    def close(self) -> None:
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.wait()
        self.server.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)
