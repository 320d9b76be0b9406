"""A child process that owns a device context, and the parent-side handle that talks to it.

The parent never imports a driver. It starts the child as ``python -m harness_tools.worker`` (a fresh
interpreter, no inherited CUDA state) inside a jail (:mod:`harness_tools.jail`: the child runs candidate
code, so it sees only what its :class:`~harness_tools.jail.JailSpec` allows and dies with us), sends ``(op, payload)`` tuples over a pipe and waits at most a
timeout for the answer. A child that does not answer in time is killed; a child that dies (a crash,
or an exit after a sticky CUDA error) is noticed; either way the next call starts a fresh one.

Protocol: the child first sends ``("ready", info)`` or ``("failed", message)``; afterwards every
request gets ``("ok", result)`` or ``("bug", traceback)``. An executor that sets ``dead = True`` while
handling a request (a lost CUDA context) gets its answer sent as ``("dying", result)``, then the child
exits so the broken context dies with it.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from . import jail
from .errors import BackendUnavailable, WorkerError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 180.0


class WorkerTimeout(WorkerError):
    """The child did not answer within the request's timeout and was killed."""


class WorkerDied(WorkerError):
    """The child process ended while a request was in flight."""


class Worker:
    """Handle on one child process running ``executor`` (``"module:Class"``) for one device."""

    def __init__(self, executor: str, device: int = 0, spec: jail.JailSpec | None = None):
        self.executor = executor
        self.device = device
        self.spec = spec or jail.JailSpec(purpose="worker")
        self._process: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self.info: dict[str, Any] | None = None
        self.restarts = 0

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> dict[str, Any]:
        # A fresh interpreter via subprocess, not multiprocessing: nothing of the caller's __main__ is
        # re-imported, so the engine works from scripts without a main guard, notebooks and REPLs.
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        # -P: do not put the current directory first on sys.path; the child imports this very engine.
        command = [sys.executable, "-P", "-m", "harness_tools.worker", self.executor, str(self.device),
                   str(to_child_r), str(to_parent_w)]
        stderr_fd = sys.stderr.fileno() if _has_fileno(sys.stderr) else None
        # The child's stdout (kernel printf) goes to our stderr: stdout may carry a protocol.
        try:
            self._process = jail.popen(command, self.spec, pass_fds=(to_child_r, to_parent_w),
                                       stdin=subprocess.DEVNULL, stdout=stderr_fd, stderr=stderr_fd)
        finally:
            os.close(to_child_r)
            os.close(to_parent_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(to_parent_r, writable=False)
        if not self._recv.poll(START_TIMEOUT_S):
            self.kill()
            raise BackendUnavailable(f"worker for device {self.device} did not start within {START_TIMEOUT_S:.0f} s")
        try:
            kind, payload = self._recv.recv()
        except EOFError:
            code = self._process.wait(timeout=30)
            self.kill()
            raise BackendUnavailable(f"worker for device {self.device} exited during start ({_describe_exit(code)})") from None
        if kind != "ready":
            self.kill()
            raise BackendUnavailable(str(payload))
        self.info = payload
        return payload

    def call(self, op: str, payload: Any, timeout_s: float) -> Any:
        """Send one request; raise WorkerTimeout or WorkerDied (the child is gone afterwards)."""
        if not self.alive:
            if self._process is not None:
                self.restarts += 1
                self.kill()
            self.start()
        assert self._send is not None and self._recv is not None
        try:
            self._send.send((op, payload))
            if not self._recv.poll(timeout_s):
                self.kill()
                raise WorkerTimeout(f"no answer within {timeout_s:g} s; the worker was killed")
            kind, result = self._recv.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            code = self._process.wait(timeout=30) if self._process else None
            self.kill()
            raise WorkerDied(f"the worker process ended during the request ({_describe_exit(code)})") from None
        if kind == "bug":
            raise WorkerError(f"worker raised an unexpected error:\n{result}")
        if kind == "dying":  # answered, then exits: reap it so the next call starts a fresh one
            self.kill()
        return result

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log.warning("worker pid %s did not exit after SIGKILL", self._process.pid)
        if self._process is not None and self._process.poll() is not None:
            jail.release(self._process)
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._send = self._recv = None

    def close(self) -> None:
        if self._send is not None and self.alive:
            try:
                self._send.send(("exit", None))
                self._process.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _child_main(receive: Connection, send: Connection, executor_path: str, device: int) -> None:
    logging.basicConfig(level=os.environ.get("CUDAOPT_LOG", "WARNING"), format="worker: %(message)s")
    try:
        module_name, _, cls_name = executor_path.partition(":")
        executor = getattr(importlib.import_module(module_name), cls_name)(device)
        send.send(("ready", executor.info()))
    except Exception as exc:  # the parent turns this into BackendUnavailable with our message
        send.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        try:
            op, payload = receive.recv()
        except EOFError:
            return
        if op == "exit":
            return
        try:
            result = getattr(executor, op)(payload)
        except Exception:
            send.send(("bug", traceback.format_exc()))
            continue
        if getattr(executor, "dead", False):
            send.send(("dying", result))
            sys.stdout.flush()
            os._exit(3)  # the context is unusable: let it die with the process
        send.send(("ok", result))


if __name__ == "__main__":
    _executor, _device, _rfd, _wfd = sys.argv[1:5]
    _child_main(Connection(int(_rfd), writable=False), Connection(int(_wfd), readable=False), _executor, int(_device))
