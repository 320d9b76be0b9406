"""A backend whose executor runs in a worker process: the shared parent-side half of cuda and cpu.

The worker is jailed: it reads inputs only from :func:`~harness_tools.run.scratch.inputs_root` and writes
only under :func:`~harness_tools.run.scratch.scratch_root`. A request whose input files or output folder
lie elsewhere (a caller's own folder, ``cudaopt eval --keep``) is staged: inputs are copied in, outputs
are written in scratch and moved to the folder asked for afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
from pathlib import Path

from harness_tools.backends.contract import CaseRequest, CaseRun, DeviceInfo
from harness_tools.errors import WorkerDied, WorkerTimeout
from harness_tools.run.jail import JailSpec
from harness_tools.run.scratch import inputs_root, scratch_dir, scratch_root
from harness_tools.run.worker import Worker


class WorkerBackend:
    """Forwards each case to ``executor`` (``module:Class``) in a worker; hangs and crashes become data."""

    name = "worker"

    def __init__(self, executor: str, device: int = 0, spec: JailSpec | None = None):
        self._worker = Worker(executor, device, spec)
        self._info = DeviceInfo.model_validate(self._worker.start())

    def device_info(self) -> DeviceInfo:
        return self._info

    @property
    def worker_pid(self) -> int | None:
        """The worker process while it runs; None between a death and the next request's restart."""
        return self._worker.pid

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun:
        return self.forward(request, timeout_s)

    def forward(self, request: CaseRequest, timeout_s: float, **extra) -> CaseRun:
        """Send one case (its fields plus ``extra``) to the worker, staging paths the jail cannot see."""
        with _staged(request) as (staged, wanted_out):
            try:
                result = self._worker.call("run_case", {**staged.model_dump(), **extra}, timeout_s)
            except WorkerTimeout as exc:
                return CaseRun(status="timeout", error="TIMEOUT", message=f"{exc}; a fresh worker takes the next request",
                               worker_restarted=True)
            except WorkerDied as exc:
                return CaseRun(status="crashed", error="WORKER_DIED", message=str(exc), worker_restarted=True)
            run = CaseRun.model_validate(result)
            if wanted_out is not None:
                run.outputs = _move_outputs(run.outputs, Path(staged.output_dir), wanted_out)
            return run

    def close(self) -> None:
        self._worker.close()


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(_real(folder))


@functools.lru_cache(maxsize=16)
def _real(folder: Path) -> Path:
    """The jail's folders, resolved once: resolving costs a system call per component, and they do not move."""
    return folder.resolve()


@contextlib.contextmanager
def _staged(request: CaseRequest):
    """(the request as the jail can serve it, the caller's output folder when it had to be replaced)."""
    foreign_inputs = [a for a in request.args if a.input_file and not _inside(Path(a.input_file), inputs_root())]
    foreign_out = not _inside(Path(request.output_dir), scratch_root())
    if not foreign_inputs and not foreign_out:
        yield request, None
        return
    with scratch_dir("cudaopt-staged-") as folder:
        args = []
        for arg in request.args:
            if arg in foreign_inputs:
                copy = folder / f"in_{len(args)}.npy"
                shutil.copyfile(arg.input_file, copy)
                arg = arg.model_copy(update={"input_file": str(copy)})
            args.append(arg)
        update = {"args": args}
        if foreign_out:
            update["output_dir"] = str(folder / "out")
        yield request.model_copy(update=update), Path(request.output_dir) if foreign_out else None


def _move_outputs(outputs: dict[str, str], staged: Path, wanted: Path) -> dict[str, str]:
    """Copy each output the worker wrote into the caller's folder: opened once, never through a link (the
    worker may still be racing to swap files), read from the opened file; the staged copy is removed."""
    wanted.mkdir(parents=True, exist_ok=True)
    moved = {}
    for name, path in outputs.items():
        source = Path(path)
        if source.parent.resolve() != (staged).resolve():  # only files it wrote where it was told
            continue
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO would block
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                continue
            target = wanted / source.name
            with open(target, "wb") as out:
                shutil.copyfileobj(handle, out, 1 << 22)
        source.unlink(missing_ok=True)
        moved[name] = str(target)
    return moved
