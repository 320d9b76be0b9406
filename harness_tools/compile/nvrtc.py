"""One NVRTC compile, as run inside the compiler's child process (:mod:`harness_tools.compile.child`), and
the result it produces.

What reaches the caller of the log: diagnostics about the candidate's own file and ptxas' report. Any
diagnostic that quotes another file is dropped, so a header's text never leaks through the log.
"""

from __future__ import annotations

import re
import time
from typing import Literal

from pydantic import BaseModel, Field

from harness_tools.compile.cubin import read_cubin
from harness_tools.compile.headers import HEADERS
from harness_tools.errors import CompilerUnavailable
from harness_tools.task.launches import is_plain_name

PROGRAM_NAME = "kernel.cu"
# NVRTC 13.0 leaves the log (ptxas -v included) empty for a source without any #include: start every
# program with an empty in-memory header, then restore the candidate's own line numbering.
_PRELUDE_HEADER = "__cudaopt_prelude.h"
_PRELUDE = f'#include "{_PRELUDE_HEADER}"\n#line 1 "{PROGRAM_NAME}"\n'
LOG_CAP_CHARS = 6000


CompileStatus = Literal["ok", "error", "refused"]


class ResourceUsage(BaseModel):
    """ptxas' report for the candidate's kernel entry."""

    registers: int | None = None
    barriers: int | None = None
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    static_shared_bytes: int = 0
    constant_bytes: int | None = None


class CompileResult(BaseModel):
    ok: bool
    status: CompileStatus
    arch: str
    kernel_name: str
    log: str = Field(description="filtered log, capped; the full filtered log is in full_log")
    log_truncated: bool = False
    compile_ms: float
    cached: bool = False
    nvrtc_version: str
    resources: ResourceUsage | None = None
    entries: list[str] = Field(default_factory=list, description="kernel entry points in the cubin")
    param_sizes: list[int] | None = Field(None, description="bytes per kernel parameter, from the cubin")
    kernel_param_sizes: dict[str, list[int] | None] = Field(
        default_factory=dict, description="bytes per parameter of every kernel the program launches")
    lowered_names: dict[str, str] = Field(default_factory=dict, description="each launched kernel's entry symbol "
                                          "(name expressions lowered by NVRTC; a plain name is its own)")
    full_log: str = Field("", exclude=True)
    cubin: bytes | None = Field(None, exclude=True, repr=False)


def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def run_nvrtc(source: str, options: list[str], arch: str, kernels: list[str], version: str) -> CompileResult:
    """Compile ``source``; ``kernels`` are the names (or C++ name expressions, e.g. ``gemm<128, 64>``) launched:
    name expressions are instantiated and lowered by NVRTC, and every one must be an entry point of the cubin."""
    nvrtc = _nvrtc()
    headers = {**HEADERS, _PRELUDE_HEADER: "#pragma once\n"}
    names = [n.encode() for n in headers]
    bodies = [headers[n].encode() for n in headers]
    expressions = [k for k in kernels if not is_plain_name(k)]
    start = time.perf_counter()
    program = (_PRELUDE + source).encode()
    err, prog = nvrtc.nvrtcCreateProgram(program, PROGRAM_NAME.encode(), len(names), bodies, names)
    _check(nvrtc, err, "nvrtcCreateProgram")
    lowered = {k: k for k in kernels if is_plain_name(k)}
    try:
        for expression in expressions:
            _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expression.encode())[0], "nvrtcAddNameExpression")
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        elapsed_ms = (time.perf_counter() - start) * 1e3
        raw_log = _program_log(nvrtc, prog)
        cubin = None
        if status == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            err, size = nvrtc.nvrtcGetCUBINSize(prog)
            _check(nvrtc, err, "nvrtcGetCUBINSize")
            cubin = bytes(size)
            (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
            _check(nvrtc, err, "nvrtcGetCUBIN")
            for expression in expressions:
                err, name = nvrtc.nvrtcGetLoweredName(prog, expression.encode())
                if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
                    lowered[expression] = name.decode() if isinstance(name, bytes) else str(name)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    log = filter_log(raw_log)
    facts = read_cubin(cubin) if cubin is not None else None
    entries = sorted(facts.kernels) if facts else re.findall(r"Compiling entry function '([^']+)'", raw_log)
    ok = cubin is not None
    missing = [k for k in kernels if lowered.get(k) not in entries]
    if ok and missing:
        ok = False
        log += "".join(f"\nkernel {k!r} is not an entry point of this source (entries: {entries}); " + (
            "declare it extern \"C\" __global__ so its name is not mangled, or launch it by a name expression "
            "such as 'ns::name<args>'" if is_plain_name(k) else "the name expression must name a __global__ "
            "function template instantiable with these arguments") for k in missing)
    capped, truncated = cap_log(log)
    main = lowered.get(kernels[0], kernels[0])
    sizes = {k: facts.kernels[lowered[k]].param_sizes for k in kernels
             if ok and facts and lowered.get(k) in facts.kernels}
    return CompileResult(
        ok=ok, status="ok" if ok else "error", arch=arch, kernel_name=kernels[0], log=capped, log_truncated=truncated,
        full_log=log, compile_ms=round(elapsed_ms, 3), nvrtc_version=version,
        resources=_resources(raw_log, main, facts),
        entries=entries, cubin=cubin if ok else None,
        param_sizes=sizes.get(kernels[0]), kernel_param_sizes=sizes,
        lowered_names={k: v for k, v in lowered.items() if ok},
    )


_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): ")


def filter_log(raw: str) -> str:
    """Keep ptxas' report and the diagnostics located in kernel.cu; drop every other one.

    A diagnostic is its first line and the indented or blank lines under it (the quoted source line,
    "detected during ..."). Lines split at LF only: a CR, form feed or other break inside a quoted line
    of another file must not start a forged ``kernel.cu(1):`` line.
    """
    # __nv_name_map: NVRTC's diagnostics of the program's own name expressions (they quote only the expression)
    kept_start = re.compile(rf"{re.escape(PROGRAM_NAME)}\([0-9]+\): |__nv_name_map\([0-9]+\): |ptxas[ \t]|"
                            rf"At end of source: |Remark: The warnings can be suppressed |"
                            rf"[0-9]+ errors? detected in the compilation of \"{re.escape(PROGRAM_NAME)}\"\.$")
    kept: list[str] = []
    dropped = 0
    keep = False
    for line in raw.replace("\x00", "").split("\n"):
        if line[:1] not in ("", " ", "\t"):  # a new diagnostic; "At end of source" is the end of kernel.cu
            keep = bool(kept_start.match(line))
            dropped += not keep and bool(_DIAGNOSTIC.match(line))
        if keep:
            kept.append(line.rstrip("\r"))
    if dropped:
        kept.append(f"[{dropped} diagnostic(s) located in other files omitted]")
    return "\n".join(kept).strip()


def _resources(raw_log: str, kernel: str, facts) -> ResourceUsage | None:
    """ptxas' report when the log has it (it alone knows spills), else what the cubin says."""
    usage = parse_resources(raw_log, kernel)
    if usage is not None or facts is None or kernel not in facts.kernels:
        return usage
    k = facts.kernels[kernel]
    return ResourceUsage(registers=k.registers, stack_bytes=k.frame_bytes, static_shared_bytes=k.static_shared_bytes)


def parse_resources(raw_log: str, kernel: str) -> ResourceUsage | None:
    """Read ptxas -v's report for ``kernel`` (its block starts at 'Compiling entry function')."""
    blocks = re.split(r"ptxas info\s*: Compiling entry function ", raw_log)
    for block in blocks[1:]:
        if not block.startswith(f"'{kernel}'"):
            continue
        usage = ResourceUsage()
        if m := re.search(r"Used (\d+) registers", block):
            usage.registers = int(m.group(1))
        if m := re.search(r"used (\d+) barriers", block):
            usage.barriers = int(m.group(1))
        if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block):
            usage.stack_bytes, usage.spill_store_bytes, usage.spill_load_bytes = map(int, m.groups())
        if m := re.search(r"(\d+) bytes smem", block):
            usage.static_shared_bytes = int(m.group(1))
        if m := re.search(r"(\d+) bytes cmem\[0\]", block):
            usage.constant_bytes = int(m.group(1))
        return usage
    return None


def cap_log(log: str) -> tuple[str, bool]:
    if len(log) <= LOG_CAP_CHARS:
        return log, False
    head = log[: LOG_CAP_CHARS - 200]
    return head + f"\n… [{len(log) - len(head)} more characters in the full log]", True


def _program_log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    _check(nvrtc, err, "nvrtcGetProgramLogSize")
    buf = bytes(size)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace")


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompilerUnavailable(f"{what} failed: {err.name}")


_INCLUDE_DIR: list[str | None] = []


def cuda_include_dir() -> str | None:
    """Directory of CUDA's own headers (the nvidia-cuda-runtime wheel or a toolkit), found once."""
    if not _INCLUDE_DIR:
        try:
            from cuda.pathfinder import find_nvidia_header_directory

            _INCLUDE_DIR.append(find_nvidia_header_directory("cudart"))
        except Exception:  # pathfinder missing or too old: candidates then cannot use cuda_fp16.h
            _INCLUDE_DIR.append(None)
    return _INCLUDE_DIR[0]


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise CompilerUnavailable(
            f"cannot import cuda.bindings.nvrtc ({exc}); install it with: pip install 'cuda-bindings>=13' "
            "nvidia-cuda-nvrtc"
        ) from None
    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:
        raise CompilerUnavailable(
            f"NVRTC library not found ({exc}); install it with: pip install nvidia-cuda-nvrtc"
        ) from None
    return nvrtc
