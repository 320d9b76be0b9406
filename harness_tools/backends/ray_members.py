"""Pool members as Ray actors: the GPUs (or CPUs) of a Ray cluster evaluate one server's candidates.

Each actor takes one GPU (``num_gpus=1``: Ray sets its ``CUDA_VISIBLE_DEVICES``) or, on the cpu backend, one CPU,
and owns an ordinary backend on its node: the same jailed worker as a local member. The server keeps the run
store. A case's files travel with it: the input and reference ``.npy`` files a request names are sent to an
actor once (keyed by path, size and modification time; the actor keeps its copies in its node's inputs folder),
and the outputs come back as bytes, written where the request asked. An actor that dies (its node or GPU gone,
or killed) fails the case with :class:`BackendUnavailable`, which takes it out of the pool; the candidate is
evaluated again elsewhere (``cudaopt_mcp.service.pooled``). Ray is imported only here (the ``[ray]`` extra).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import uuid
from pathlib import Path
from typing import Any

from harness_tools.backends import backend_traits
from harness_tools.backends.contract import CaseRequest, CaseRun, DeviceInfo
from harness_tools.errors import BackendError, BackendUnavailable
from harness_tools.run.lasting_thread import LastingThread

START_TIMEOUT_S = 300.0  # scheduling an actor can wait for a node to come up
EXTRA_S = 60.0  # beyond a case's own timeout: shipping its files both ways


def ray_module():
    try:
        import ray
    except ImportError:
        raise BackendError("--ray needs Ray: pip install 'cudaopt[ray]'") from None
    return ray


def connect(address: str, workers: int | None) -> Any:
    """Join the cluster at ``address`` ('local': start one here with ``workers`` CPUs, at least 2).

    ``ray.init`` runs in a thread that lasts as long as this process: a local cluster's daemons die with the
    thread that started them (PDEATHSIG), and the first call that needs Ray may come from a short-lived one."""
    ray = ray_module()
    if not ray.is_initialized():
        if address == "local":
            _RAY_THREAD.call(ray.init, num_cpus=max(2, workers or 2), include_dashboard=False, log_to_driver=False)
        else:
            _RAY_THREAD.call(ray.init, address=address, log_to_driver=False)
    return ray


_RAY_THREAD = LastingThread("cudaopt-ray")


def cluster_gpus(address: str, workers: int | None) -> int:
    """The cluster's GPUs; a local cluster started by this call gets ``workers`` CPUs, as :func:`connect` gives."""
    return int(connect(address, workers).cluster_resources().get("GPU", 0))


class RayMember:
    """An :class:`~harness_tools.backends.protocols.ExecutionBackend` whose worker lives in a Ray actor."""

    def __init__(self, backend: str):
        ray = ray_module()
        self.name = backend
        self.traits = backend_traits(backend)
        resources = {"num_gpus": 1} if backend == "cuda" else {"num_cpus": 1}
        self._actor = ray.remote(_MemberActor).options(**resources, max_restarts=0).remote(backend)
        try:
            self._info = DeviceInfo.model_validate(ray.get(self._actor.info.remote(), timeout=START_TIMEOUT_S))
        except Exception as exc:  # no node with a free GPU, or its backend would not start there
            ray.kill(self._actor)
            raise BackendUnavailable(f"a Ray actor for the {backend} backend did not start: {exc}") from None
        self._sent: set[str] = set()  # files this actor already holds

    def device_info(self) -> DeviceInfo:
        return self._info

    @property
    def worker_pid(self) -> int | None:
        return None  # the worker runs on the actor's node

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun:
        ray = ray_module()
        keys = {path: _key(path) for path in _files(request)}
        blobs = {key: Path(path).read_bytes() for path, key in keys.items() if key not in self._sent}
        try:
            run, outputs = ray.get(self._actor.run_case.remote(request.model_dump(), keys, blobs, timeout_s),
                                   timeout=timeout_s + EXTRA_S)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            raise BackendUnavailable(f"the Ray actor died or stopped answering: {type(exc).__name__}") from None
        self._sent.update(blobs)
        result = CaseRun.model_validate(run)
        folder = Path(request.output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        result.outputs = {}
        for name, (file_name, data) in outputs.items():
            if Path(file_name).name != file_name or file_name in ("", ".", ".."):
                continue  # a bare file name or nothing: the actor's answer never picks a folder here
            target = folder / file_name
            target.write_bytes(data)
            result.outputs[name] = str(target)
        return result

    def close(self) -> None:
        ray = ray_module()
        try:
            ray.get(self._actor.close.remote(), timeout=30)
        except Exception:  # already gone
            pass
        ray.kill(self._actor)


class _MemberActor:
    """The actor's side: one backend on this node, the files it was sent, one case at a time."""

    def __init__(self, backend: str):
        from harness_tools.backends import create_backend
        from harness_tools.run.scratch import inputs_root

        self.backend = create_backend(backend)
        self.files = inputs_root() / f"ray-{uuid.uuid4().hex[:12]}"
        self.files.mkdir(parents=True, exist_ok=True)

    def info(self) -> dict:
        return self.backend.device_info().model_dump()

    def run_case(self, request: dict, keys: dict[str, str], blobs: dict[str, bytes], timeout_s: float):
        for key, data in blobs.items():
            (self.files / f"{key}.npy").write_bytes(data)
        local = {path: str(self.files / f"{key}.npy") for path, key in keys.items()}
        # outside the jail's scratch: the backend then copies out only files its worker wrote there (worker_backend)
        out = Path(tempfile.mkdtemp(prefix="cudaopt-ray-out-"))
        req = CaseRequest.model_validate(request)
        args = []
        for arg in req.args:
            update: dict[str, Any] = {}
            if arg.input_file:
                update["input_file"] = local[arg.input_file]
            if arg.check is not None:
                update["check"] = arg.check.model_copy(update={
                    "hi_file": local[arg.check.hi_file],
                    "lo_file": local[arg.check.lo_file] if arg.check.lo_file else None})
            args.append(arg.model_copy(update=update) if update else arg)
        req = req.model_copy(update={"args": args, "output_dir": str(out)})
        try:
            run = self.backend.run_case(req, timeout_s)
            outputs = _outputs_in(run.outputs, out)
            return run.model_dump(), outputs
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def close(self) -> None:
        self.backend.close()
        shutil.rmtree(self.files, ignore_errors=True)


def _outputs_in(outputs: dict[str, str], folder: Path) -> dict[str, tuple[str, bytes]]:
    """(file name, bytes) of each output that is a regular file directly in ``folder``, opened without following
    a link. The paths come from a worker running candidate code: this actor runs outside the jail and must not
    read (and send to the server) a file elsewhere on its node because a worker named it."""
    got = {}
    for name, path in outputs.items():
        source = Path(path)
        if source.parent.resolve() != folder.resolve() or source.name in ("", ".", ".."):
            continue
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO would block
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                got[name] = (source.name, handle.read())
    return got


def _files(request: CaseRequest) -> list[str]:
    files = []
    for arg in request.args:
        if arg.input_file:
            files.append(arg.input_file)
        if arg.check is not None:
            files += [arg.check.hi_file] + ([arg.check.lo_file] if arg.check.lo_file else [])
    return files


def _key(path: str) -> str:
    """Names one version of a file: its path, size and modification time (inputs are rewritten per seed)."""
    stat = os.stat(path)
    return hashlib.sha256(f"{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:32]
