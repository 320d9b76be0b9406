"""Does a task's case fit where it will run? Refused before anything is drawn or allocated, with what to change."""

from __future__ import annotations

from harness_tools.backends import backend_traits
from harness_tools.backends.contract import DeviceInfo
from harness_tools.check.inputs import available_host_bytes, case_footprint
from harness_tools.errors import BackendError
from harness_tools.task.spec import Case, Task


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def check_memory(task: Task, cases: list[Case], backend: str, device: DeviceInfo) -> None:
    """Refuse, before anything is drawn or allocated, a case that does not fit the device or host memory."""
    free = device.memory_free_bytes if device.memory_free_bytes is not None else device.memory_bytes
    host = available_host_bytes()
    hint = ("shrink its sizes in task.json, or leave it out (evaluate with roles=['validation'] or "
            "cudaopt eval --only validation, or list the backends it runs on in the case's 'backends')")
    in_host = backend_traits(backend).buffers_in_host_memory
    for case in cases:
        need = case_footprint(task.spec, case, in_host)
        if not in_host and free is not None and need.buffers > free:
            where = "free" if device.memory_free_bytes is not None else "in total"
            raise BackendError(f"case {case.name} needs {_gb(need.buffers)} of buffers; this GPU has {_gb(free)} "
                               f"{where}: {hint}")
        if host is not None and need.host > host:
            what = "its inputs, outputs and their float64 reference" + (f", and the buffers themselves: the {backend} "
                                                                       "backend runs kernels in host memory"
                                                                       if in_host else "")
            raise BackendError(f"case {case.name} needs about {_gb(need.host)} of host memory ({what}); this machine "
                               f"has {_gb(host)} of memory available: {hint}")
