"""Does the compiled kernel take the arguments the task passes? Checked from the cubin's parameter sizes.

A kernel that declares ``size_t n`` where the task passes ``int32`` reads 4 bytes of garbage on a GPU
(and is converted silently by the cpu backend's C++ launcher), so its results would mean nothing. NVRTC
does not know the task; the cubin records each parameter's size (see :mod:`harness_tools.compile.cubin`). Only
sizes can be compared: ``float`` and ``int`` are both 4 bytes, every pointer is 8.
"""

from __future__ import annotations

import numpy as np

from harness_tools.task.spec import CTYPES, BufferParam, TaskSpec

POINTER_BYTES = 8


def parameter_problem(spec: TaskSpec, sizes: list[int] | None) -> str | None:
    """What is wrong with the compiled kernel's parameters for this task, or None (also when unknown)."""
    if sizes is None:
        return None
    expected = [POINTER_BYTES if isinstance(p, BufferParam) else np.dtype(p.dtype).itemsize for p in spec.params]
    if len(sizes) != len(expected):
        return (f"the compiled kernel takes {len(sizes)} parameter(s) but the task passes {len(expected)} "
                f"({', '.join(p.name for p in spec.params)}); keep the task's exact signature")
    for number, (param, got, want) in enumerate(zip(spec.params, sizes, expected), start=1):
        if got != want:
            ctype = f"{CTYPES[param.dtype]}*" if isinstance(param, BufferParam) else CTYPES[param.dtype]
            return (f"parameter {number} ({param.name}) is {got} bytes in the compiled kernel but the task passes "
                    f"{want} bytes: declare it as {ctype} {param.name}")
    return None
