"""A kernel's signature as read from its source, confirmed by what NVRTC compiled (``cudaopt new``).

The scaffold reads types and names from the source (the cubin has neither); the cubin has what the launch will
really pass: how many parameters and their sizes. A macro, a typedef or a default argument the reading got
wrong shows up as a difference here, before a task is written around it. The compile runs like a candidate's
(include guard, jailed child, the on-disk cubin cache).
"""

from __future__ import annotations

from harness_tools.compile.param_check import POINTER_BYTES
from harness_tools.compile.program import compile_candidate
from harness_tools.errors import TaskSpecError
from harness_tools.task.candidate import Candidate
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.launches import LaunchSpec
from harness_tools.task.scaffold import KernelParam, kernel_signature

ONE_THREAD = LaunchSpec(grid=[1], block=[1])  # never launched: a candidate needs one to be compiled
CHECK_ARCH = "sm_90"  # parameter sizes do not depend on the architecture; any NVRTC target shows them


def checked_signature(source: str, kernel: str | None = None) -> tuple[str, list[KernelParam], str]:
    """(kernel, params, how it was checked); a kernel that does not compile, or whose compiled parameters differ
    from the source's reading, is a TaskSpecError naming the difference."""
    name, params = kernel_signature(source, kernel)
    compiled = compile_candidate(Candidate(source=source, kernel_name=name, launch=ONE_THREAD), CHECK_ARCH)
    if not compiled.ok:
        first = next((line.strip() for line in compiled.log.splitlines() if "error" in line), compiled.log.strip())
        raise TaskSpecError("--kernel", "-", f"kernel {name} does not compile ({compiled.status}): {first[:400]}")
    sizes = compiled.kernel_param_sizes.get(name) or compiled.param_sizes
    if sizes is None:
        return name, params, "read from the source (the cubin did not record parameter sizes)"
    expected = [POINTER_BYTES if p.pointer else numpy_dtype(p.dtype).itemsize for p in params]
    if len(sizes) != len(expected):
        raise TaskSpecError("--kernel", "-", f"kernel {name}: the source reads as {len(expected)} parameter(s) "
                            f"({', '.join(p.name for p in params)}) but the compiled kernel takes {len(sizes)}: "
                            "write the signature out without macros")
    for p, want, got in zip(params, expected, sizes):
        if want != got:
            raise TaskSpecError("--kernel", "-", f"kernel {name}: parameter {p.name} reads as {p.dtype}"
                                f"{'*' if p.pointer else ''} ({want} bytes) but is {got} bytes in the compiled "
                                "kernel: write its type out without a typedef or macro")
    return name, params, f"checked against the compiled cubin ({len(sizes)} parameters, NVRTC {compiled.nvrtc_version})"
