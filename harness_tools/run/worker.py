"""A child process that owns a device context, and the parent-side handle that talks to it.

The parent never imports a driver. It starts the child as ``python -m harness_tools.run.worker`` (a fresh
interpreter, no inherited CUDA state) inside a jail (:mod:`harness_tools.run.jail`: the child runs candidate
code, so it sees only what its :class:`~harness_tools.run.jail.JailSpec` allows and dies with us), sends
``[op, payload]`` messages over a pipe (:mod:`harness_tools.run.messages`: JSON frames, never pickle,
since the child may be running hostile native code) and waits at most a timeout for the whole answer. A
child that does not answer in time is killed; a child that dies (a crash, or an exit after a sticky CUDA
error) or garbles its answer is noticed; either way the next call starts a fresh one.

Protocol: the child first sends ``["ready", info]`` or ``["failed", message]``; afterwards every request
gets ``["ok", result]`` or ``["bug", traceback]``. An executor that sets ``dead = True`` while handling a
request (a lost CUDA context) gets its answer sent as ``["dying", result]``, then the child exits so the
broken context dies with it. What the child prints (kernel ``printf``) reaches our stderr through a
relay that marks and caps it: it can neither fill the caller's log nor forge its lines.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from harness_tools.errors import BackendUnavailable, WorkerDied, WorkerError, WorkerTimeout
from harness_tools.run import cancellation, jail, messages

log = logging.getLogger(__name__)

START_TIMEOUT_S = 180.0
OUTPUT_CAP_BYTES = 1 << 20  # of a child's printed output relayed to our stderr, per child


class Worker:
    """Handle on one child process running ``executor`` (``"module:Class"``) for one device."""

    def __init__(self, executor: str, device: int = 0, spec: jail.JailSpec | None = None):
        self.executor = executor
        self.device = device
        self.spec = spec or jail.JailSpec(purpose="worker")
        self._process: subprocess.Popen | None = None
        self._to_child: int | None = None
        self._from_child: int | None = None
        self.info: dict[str, Any] | None = None
        self.restarts = 0
        # interrupt() before the process exists: the start in flight (or the next) must not bring one up. Set
        # before interrupt reads _process, read after start sets it: one of the two always sees the other.
        self._interrupted = threading.Event()

    @property
    def pid(self) -> int | None:
        """The worker's process (the jail's, when jailed: ending it ends the worker) while it runs."""
        return self._process.pid if self.alive else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> dict[str, Any]:
        # A fresh interpreter via subprocess, not multiprocessing: nothing of the caller's __main__ is
        # re-imported, so the engine works from scripts without a main guard, notebooks and REPLs.
        started = time.monotonic()
        self._give_up_if_interrupted()
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        # -P: do not put the current directory first on sys.path; the child imports this very engine.
        command = [sys.executable, "-P", "-m", "harness_tools.run.worker", self.executor, str(self.device),
                   str(to_child_r), str(to_parent_w)]
        try:
            self._process = jail.popen(command, self.spec, beside_probe=True, pass_fds=(to_child_r, to_parent_w),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except BaseException:
            for fd in (to_child_w, to_parent_r):
                os.close(fd)
            raise
        finally:
            os.close(to_child_r)
            os.close(to_parent_w)
        self._to_child, self._from_child = to_child_w, to_parent_r
        threading.Thread(target=_relay, args=(self._process.stdout,), name="cudaopt-worker-output", daemon=True).start()
        if self._interrupted.is_set():  # interrupted while the jail was being spawned: ended before it runs anything
            self.kill()
            self._give_up_if_interrupted()
        try:
            kind, payload = messages.receive(self._from_child, START_TIMEOUT_S)
        except messages.FrameTimeout:
            self.kill()
            raise BackendUnavailable(f"worker for device {self.device} did not start within {START_TIMEOUT_S:.0f} s") from None
        except (EOFError, messages.BadFrame, ValueError, TypeError):
            code = self._wait(30)
            self.kill()
            raise BackendUnavailable(f"worker for device {self.device} exited during start ({_describe_exit(code)})") from None
        if kind != "ready":
            self.kill()
            raise BackendUnavailable(str(payload))
        self.info = payload
        log.info("worker pid %s for device %d ready in %.3f s", self._process.pid, self.device, time.monotonic() - started)
        return payload

    def call(self, op: str, payload: Any, timeout_s: float) -> Any:
        """Send one request; raise WorkerTimeout or WorkerDied (the child is gone afterwards), or Cancelled when
        the current work (:mod:`~harness_tools.run.cancellation`) is cancelled: the child is killed at once."""
        cancellation.checkpoint()
        if not self.alive:
            if self._process is not None:
                self.restarts += 1
                self.kill()
            self.start()
        assert self._to_child is not None and self._from_child is not None
        try:
            with cancellation.killable(self._signal_kill):
                messages.send(self._to_child, [op, payload])
                kind, result = messages.receive(self._from_child, timeout_s)
        except messages.FrameTimeout:
            self.kill()
            raise WorkerTimeout(f"no answer within {timeout_s:g} s; the worker was killed") from None
        except (EOFError, BrokenPipeError, ConnectionResetError, messages.BadFrame, ValueError, TypeError) as exc:
            lost = time.monotonic()
            code = self._wait(5)
            log.info("worker pid %s ended %.3f s after its pipe closed (%s)", self._process.pid,
                     time.monotonic() - lost, _describe_exit(code))
            self.kill()
            cancellation.checkpoint()  # killed because the work was cancelled: not the kernel's doing
            why = f"; {exc}" if isinstance(exc, messages.BadFrame) else ""
            raise WorkerDied(f"the worker process ended during the request ({_describe_exit(code)}){why}") from None
        if kind == "bug":
            raise WorkerError(f"worker raised an unexpected error:\n{result}")
        if kind == "dying":  # answered, then exits: reap it so the next call starts a fresh one
            self.kill()
        elif kind != "ok":
            self.kill()
            raise WorkerDied(f"the worker answered with an unknown message kind {str(kind)[:40]!r}")
        return result

    def interrupt(self) -> None:
        """From another thread: end the process now; a start or call blocked on it fails and cleans up itself. A
        start whose process is not spawned yet fails as soon as it is (killed at once), or before spawning it: so a
        start is never waited out, and nothing it spawned runs afterwards. Only the start in flight, or the next
        one when none is, is failed."""
        self._interrupted.set()  # first: a start that sets _process after the read below sees it
        if self._signal_kill():
            self._interrupted.clear()  # a process was there to end: its start or call fails on its own

    def _give_up_if_interrupted(self) -> None:
        if self._interrupted.is_set():
            self._interrupted.clear()
            raise BackendUnavailable(f"the start of a worker for device {self.device} was interrupted")

    def _signal_kill(self) -> bool:
        """SIGKILL only (from the cancelling thread): the blocked call sees the pipe close and cleans up itself.
        Whether there was a running process to end."""
        process = self._process
        if process is None or process.poll() is not None:
            return False
        jail.end(process)
        return True

    def _wait(self, timeout_s: float) -> int | None:
        try:
            return self._process.wait(timeout=timeout_s) if self._process else None
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            killed = time.monotonic()
            jail.end(self._process)  # bwrap, or the child itself without a jail: the jail ends with it (release)
            if self._wait(60) is not None:
                log.info("worker pid %s ended %.3f s after SIGKILL", self._process.pid, time.monotonic() - killed)
            else:
                log.warning("worker pid %s did not exit after SIGKILL", self._process.pid)
        if self._process is not None and self._process.poll() is not None:
            jail.release(self._process)
        for fd in (self._to_child, self._from_child):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = None

    def close(self) -> None:
        if self._to_child is not None and self.alive:
            asked = time.monotonic()
            try:
                messages.send(self._to_child, ["exit", None])
                self._process.wait(timeout=10)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
            else:  # a cuda worker's exit includes its context's teardown
                log.debug("worker pid %s exited %.3f s after it was asked to", self._process.pid, time.monotonic() - asked)
        self.kill()


def close_side_by_side(closers: list[Callable[[], None]], wait: bool = True) -> None:
    """Run each ``close`` in a thread of its own: each waits for its process's exit (a cuda worker's includes its
    context's teardown), so side by side they take the longest one's time, not the sum. ``wait=False`` leaves them
    to finish: for a process about to end, whose jailed children die with it anyway (PDEATHSIG). A close's error is
    logged."""
    def close(one: Callable[[], None]) -> None:
        try:
            one()
        except Exception:  # one child's failed close must not stop the others'
            log.warning("a worker's close failed", exc_info=True)

    threads = [threading.Thread(target=close, args=(one,), name="cudaopt-close", daemon=True) for one in closers]
    for thread in threads:
        thread.start()
    for thread in threads if wait else []:
        thread.join()


def _relay(stream) -> None:
    """Copy a child's output to our stderr, each line marked, at most OUTPUT_CAP_BYTES; drain the rest."""
    sent = 0
    try:
        for raw in iter(lambda: stream.readline(64 << 10), b""):
            if sent < OUTPUT_CAP_BYTES:
                line = raw.decode(errors="replace").rstrip("\r\n").replace("\r", "\\r")
                sys.stderr.write(f"[worker output] {line}\n")
                sent += len(raw)
                if sent >= OUTPUT_CAP_BYTES:
                    sys.stderr.write(f"[worker output] ... more than {OUTPUT_CAP_BYTES} bytes; the rest is dropped\n")
                sys.stderr.flush()
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


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


def _child_main(receive_fd: int, send_fd: int, executor_path: str, device: int) -> None:
    logging.basicConfig(level=os.environ.get("CUDAOPT_LOG", "WARNING"), format="worker: %(message)s")
    try:
        module_name, _, cls_name = executor_path.partition(":")
        executor = getattr(importlib.import_module(module_name), cls_name)(device)
        messages.send(send_fd, ["ready", executor.info()])
    except Exception as exc:  # the parent turns this into BackendUnavailable with our message
        messages.send(send_fd, ["failed", f"{type(exc).__name__}: {exc}"])
        return
    while True:
        try:
            op, payload = messages.receive(receive_fd)
        except EOFError:
            return
        if op == "exit":
            return
        try:
            result = getattr(executor, op)(payload)
        except Exception:
            messages.send(send_fd, ["bug", traceback.format_exc()])
            continue
        if getattr(executor, "dead", False):
            messages.send(send_fd, ["dying", result])
            sys.stdout.flush()
            os._exit(3)  # the context is unusable: let it die with the process
        messages.send(send_fd, ["ok", result])


if __name__ == "__main__":
    _executor, _device, _rfd, _wfd = sys.argv[1:5]
    _child_main(int(_rfd), int(_wfd), _executor, int(_device))
