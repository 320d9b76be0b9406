"""NumPy references of large cases, computed in a process of their own instead of a thread of the server's.

The server's process runs Python most of the time (the MCP SDK, the loop, the tuner's model, the imports of a
start). A reference making many NumPy calls from a thread beside that work waits for the interpreter's lock after
every call, up to its switch interval (5 ms): the convolution example's float64 oracle (about 148,000 calls) took
6.5 s instead of under one during ``optimize``'s start on the H100, and 398 s instead of 2 s on a 2-core host beside
a thread that never lets go of the lock. It also held the process's BLAS lock (:mod:`harness_tools.run.host_blas`)
all that while, which every jailed worker's spawn waits for. Here it has an interpreter to itself.

Which: NumPy references of a case whose input files add up to at least :data:`MIN_INPUT_BYTES` (a smaller one costs
less in-process than the round trip) and whose float64 outputs are at most :data:`MAX_OUTPUT_BYTES` (they are written
to a file once per seed, 0.4 s a GB on /dev/shm: KernelBench's 6.4 GB LogSoftmax, whose oracle is a few large NumPy
calls, would pay 5 s for it). The process is the user's, as the reference is (task folders are local,
:mod:`harness_tools.check.task_functions`): it is not jailed. It reads the case's input files (the input cache's)
and writes the float64 outputs as ``.npy`` files into a folder it is given, under
:func:`~harness_tools.run.scratch.oracle_root`, which no jail sees (under ``scratch/`` a candidate's worker could have
rewritten its own oracle); they are mapped here copy-on-write and unlinked at once. One process, one request at a time (as the BLAS lock had it); it starts on first use, dies with
this process, and a fresh one takes the request after one that died. A reference that raises is the task's bug
(:class:`~harness_tools.errors.TaskSpecError`, as in-process); a process that dies is reported with how it died (not
computed again here: an out-of-memory kill would then take the server); a failure of the process's own (its
folder's filesystem full, say) is :class:`~harness_tools.errors.ReferenceProcessError`, and the caller computes
the case in its own process, as before this module.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness_tools.errors import BadFrame, ReferenceProcessError, TaskSpecError
from harness_tools.run import messages
from harness_tools.run.lasting_thread import LastingThread
from harness_tools.run.scratch import oracle_root
from harness_tools.task.spec import Case, NumpyReference, Task, buffer_bytes

MIN_INPUT_BYTES = 8 << 20
MAX_OUTPUT_BYTES = 1 << 30  # float64: writing them to the file costs 0.4 s a GB, the oracle often less
_SYS_PATH_ENV = "CUDAOPT_REFERENCE_SYS_PATH"
ENV = "CUDAOPT_REFERENCE_PROCESS"  # "off": every reference in-process (debugging, or a host that cannot spawn)
_ENGINE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding the harness_tools package
# the child asks to die with its parent, which Linux takes to be the thread that started it: one that lasts
_SPAWNER = LastingThread("cudaopt-reference-spawner")


def computed_away(task: Task, case: Case, files: dict[str, Path] | None) -> bool:
    """Whether ``task``'s reference, on ``case``'s inputs in ``files``, is computed in the reference process."""
    if not files or not _may(task):
        return False
    return _sized_for(task, case, sum(path.stat().st_size for path in files.values()))


def needed_for(task: Task, cases: list[Case]) -> bool:
    """Whether some of ``cases`` will be computed in the reference process (judged from the spec's input shapes)."""
    if not _may(task):
        return False
    inputs = [b for b in task.spec.buffers if b.role != "out"]
    return any(_sized_for(task, case, sum(buffer_bytes(b, task.spec.shape_of(b, case.sizes)) for b in inputs))
               for case in cases)


def _may(task: Task) -> bool:
    return isinstance(task.spec.reference, NumpyReference) and os.environ.get(ENV, "").strip().lower() != "off"


def _sized_for(task: Task, case: Case, input_bytes: int) -> bool:
    """Large enough inputs for the round trip to pay, float64 outputs small enough for their file to."""
    outputs = sum(8 * math.prod(task.spec.shape_of(b, case.sizes)) for b in task.spec.outputs)
    return input_bytes >= MIN_INPUT_BYTES and outputs <= MAX_OUTPUT_BYTES


class ReferenceProcess:
    """The parent's handle: :meth:`outputs` sends one case and waits for its outputs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._to_child = self._from_child = -1

    def outputs(self, task: Task, case: Case, files: dict[str, Path]) -> dict[str, np.ndarray]:
        """The float64 outputs of ``task``'s NumPy reference on ``case``, whose inputs are ``files``."""
        ref = task.spec.reference
        assert isinstance(ref, NumpyReference)
        request = {"task": task.model_dump_json(), "case": case.model_dump_json(),
                   "files": {name: str(path) for name, path in files.items()}}
        with self._lock:
            folder = Path(tempfile.mkdtemp(prefix="cudaopt-reference-", dir=oracle_root()))  # no jail writes it
            try:
                kind, payload = self._ask({**request, "out": str(folder)}, str(task.folder / ref.file))
                if kind == "task":
                    raise TaskSpecError(*payload)
                if kind != "ok":
                    raise ReferenceProcessError(f"the reference process failed on case {case.name}:\n{payload}")
                # copy-on-write maps: no read now, writable as a computed array is, and valid once unlinked
                return {name: np.load(path, mmap_mode="c") for name, path in payload.items()}
            finally:
                shutil.rmtree(folder, ignore_errors=True)

    def start(self) -> None:
        """Start the process now, without waiting for its imports (a caller about to need it: the draw ahead)."""
        with self._lock:
            self._start()

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ask(self, request: dict, where: str) -> tuple[str, object]:
        self._start()
        try:
            messages.send(self._to_child, request)
            return messages.receive(self._from_child)  # no deadline: a reference takes what it takes, as in-process
        except (EOFError, BrokenPipeError, ConnectionResetError, BadFrame, ValueError, TypeError):
            code = self._process.wait() if self._process is not None else None
            self._stop()
            raise TaskSpecError(where, "reference.function", f"the process computing the reference ended during "
                                                             f"the call ({_exit_text(code)})") from None

    def _start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._stop()
        to_child_r, self._to_child = os.pipe()
        self._from_child, to_parent_w = os.pipe()
        # the engine importable for -m; then the reference imports what it would import here (this sys.path)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ENGINE_PARENT),
                                                                          os.environ.get("PYTHONPATH")])),
               _SYS_PATH_ENV: json.dumps(sys.path)}
        command = [sys.executable, "-P", "-m", "harness_tools.check.reference_process", str(to_child_r),
                   str(to_parent_w), str(os.getpid())]
        try:  # stdout: a stdio server's is its protocol
            self._process = _SPAWNER.call(subprocess.Popen, command, pass_fds=(to_child_r, to_parent_w),
                                          stdin=subprocess.DEVNULL, stdout=2, env=env)
        except OSError as exc:
            self._stop()
            raise ReferenceProcessError(f"the reference process cannot start: {exc}") from exc
        finally:
            os.close(to_child_r)
            os.close(to_parent_w)

    def _stop(self) -> None:
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                os.close(fd)
        self._to_child = self._from_child = -1
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


REFERENCES = ReferenceProcess()
atexit.register(REFERENCES.close)


# ---- the child ----------------------------------------------------------------------------------------------------
def _die_with(parent: int) -> None:
    """SIGKILL when the parent goes (a reference may compute for minutes after its caller is gone)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it went before the request above took effect
        os._exit(0)


def _serve(receive_fd: int, send_fd: int, compute: Callable[[Task, Case, dict[str, np.ndarray]], dict]) -> None:
    while True:
        try:
            request = messages.receive(receive_fd)
        except EOFError:
            return
        try:
            answer = ["ok", _answer(request, compute)]
        except TaskSpecError as exc:
            answer = ["task", [exc.file, exc.field, exc.problem]]
        except Exception:  # noqa: BLE001 - the parent raises it with this text
            answer = ["bug", traceback.format_exc()]
        messages.send(send_fd, answer)


def _answer(request: dict, compute: Callable[[Task, Case, dict[str, np.ndarray]], dict]) -> dict[str, str]:
    from harness_tools.task.dtypes import as_dtype

    task, case = Task.model_validate_json(request["task"]), Case.model_validate_json(request["case"])
    dtypes = {b.name: b.dtype for b in task.spec.buffers}
    inputs = {name: as_dtype(np.load(path, mmap_mode="r"), dtypes[name]) for name, path in request["files"].items()}
    outputs = compute(task, case, inputs)
    written = {}
    for name, array in outputs.items():
        written[name] = str(Path(request["out"]) / f"{name}.npy")
        np.save(written[name], array)
    return written


if __name__ == "__main__":
    _die_with(int(sys.argv[3]))
    sys.path[:] = json.loads(os.environ.pop(_SYS_PATH_ENV, "null")) or sys.path
    from harness_tools.check.numpy_reference import numpy_outputs

    _serve(int(sys.argv[1]), int(sys.argv[2]), numpy_outputs)
