"""Does the compiled kernel take the arguments the task passes? Checked from the cubin's parameter sizes.

A kernel that declares ``size_t n`` where the task passes ``int32`` reads 4 bytes of garbage on a GPU
(and is converted silently by the cpu backend's C++ launcher), so its results would mean nothing. NVRTC
does not know the task; the cubin records each parameter's size (see :mod:`harness_tools.compile.cubin`). Only
sizes can be compared: ``float`` and ``int`` are both 4 bytes, every pointer is 8.
"""

from __future__ import annotations

from harness_tools.compile.nvrtc import CompileResult
from harness_tools.task.candidate import Candidate
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.launches import ScalarValue
from harness_tools.task.spec import CTYPES, BufferParam, TaskSpec

POINTER_BYTES = 8


def parameter_problem(spec: TaskSpec, compiled: CompileResult, candidate: Candidate) -> str | None:
    """What is wrong with the compiled kernels' parameters for the arguments the program passes them, or None
    (also when unknown). One launch with the task's signature passes the task's params (less the inputs that
    fill __constant__ symbols); a step of a launch sequence passes its own ``args``."""
    for index, (kernel, _, refs) in enumerate(candidate.steps()):
        sizes = compiled.kernel_param_sizes.get(kernel)
        if sizes is None:
            continue
        where = f"launches.{index} ({kernel}): " if candidate.launches is not None else ""
        expected = _expected(spec, candidate, refs)
        if len(sizes) != len(expected):
            names = ", ".join(name for name, _, _ in expected)
            return (f"{where}the compiled kernel takes {len(sizes)} parameter(s) but "
                    f"{'the task passes' if refs is None else 'this launch passes'} {len(expected)} ({names}); "
                    + ("keep the task's exact signature" if refs is None else "make 'args' match the kernel"))
        for number, ((name, want, ctype), got) in enumerate(zip(expected, sizes), start=1):
            if want is not None and got != want:
                return (f"{where}parameter {number} ({name}) is {got} bytes in the compiled kernel but "
                        f"{'the task' if refs is None else 'the launch'} passes {want} bytes: declare it as {ctype} "
                        f"{name}")
    return None


def _expected(spec: TaskSpec, candidate: Candidate, refs: list | None) -> list[tuple[str, int | None, str]]:
    """(name, bytes or None where unknown, C type) of every argument a launch passes."""
    if refs is None:
        return [_param(p) for p in spec.arguments]
    params = {p.name: p for p in spec.params}
    scratch = {b.name: b for b in candidate.scratch}
    out = []
    for ref in refs:
        if isinstance(ref, ScalarValue):
            out.append(("value", numpy_dtype(ref.dtype).itemsize, CTYPES[ref.dtype]))
        elif ref in params:
            out.append(_param(params[ref]))
        elif ref in scratch:
            out.append((ref, POINTER_BYTES, f"{CTYPES[scratch[ref].dtype]}*"))
        else:  # names nothing: the case's request says so, naming the field
            out.append((ref, None, "?"))
    return out


def _param(p) -> tuple[str, int, str]:
    if isinstance(p, BufferParam):
        return p.name, POINTER_BYTES, f"{CTYPES[p.dtype]}*"
    return p.name, numpy_dtype(p.dtype).itemsize, CTYPES[p.dtype]
