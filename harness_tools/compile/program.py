"""NVRTC → cubin for one GPU architecture, with a resource report and a compile cache.

Compilation needs no GPU: give ``arch`` explicitly (``sm_90`` for the H200). A compile error is data
(``CompileResult.ok`` is False, the log says why); only a missing NVRTC raises. The compiler itself runs
in a jailed child (:mod:`harness_tools.compile.child`, calling :mod:`harness_tools.compile.nvrtc`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading

from harness_tools.compile import disk_cache
from harness_tools.compile.child import DEFAULT_TIMEOUT_S, SERVICE, Ticket
from harness_tools.compile.header_names import clash_note
from harness_tools.compile.headers import HEADERS
from harness_tools.compile.nvrtc import PROGRAM_NAME, CompileResult, cap_log, cuda_include_dir, nvrtc_version
from harness_tools.task.candidate import Candidate
from harness_tools.task.include_guard import CUDA_HEADERS, GuardVerdict, check_source

_CACHE: dict[str, CompileResult] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 256
_IN_FLIGHT: dict[str, _Claim] = {}  # keys being compiled now
# The engine's own headers are part of every program: a change to them changes every key.
_HEADERS_DIGEST = hashlib.sha256(json.dumps(HEADERS, sort_keys=True).encode()).hexdigest()


def compile_candidate(candidate: Candidate, arch: str, timeout_s: float | None = None, urgent: bool = True
                      ) -> CompileResult:
    """Compile ``candidate`` to a cubin for ``arch`` (e.g. ``sm_90``); never raises for bad source.

    NVRTC runs in a child process (:mod:`harness_tools.compile.child`): a compile that hangs past
    ``timeout_s`` (default 60 s, ``CUDAOPT_COMPILE_TIMEOUT_S``) or crashes the compiler is an error result.
    ``urgent=False``: a compile ahead, which nothing waits on yet; urgent ones get a compiler child first.
    """
    if not re.fullmatch(r"sm_\d{2,3}[a-z]?", arch):
        raise ValueError(f"arch must look like sm_90, got {arch!r}")
    version = nvrtc_version()
    verdict = _guard_verdict(candidate.source)
    if not verdict.ok:
        log = "\n".join(verdict.refusals)
        return CompileResult(ok=False, status="refused", arch=arch, kernel_name=candidate.kernel_name,
                             log=cap_log(log)[0], full_log=log, compile_ms=0.0, nvrtc_version=version)
    options = _options(candidate, arch, verdict.source)
    kernels = candidate.kernel_names()
    key = hashlib.sha256("\0".join([version, _HEADERS_DIGEST, arch, *kernels, "", verdict.source, *options]).encode()
                         ).hexdigest()
    wait_s = timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S
    hit, claim = _cached_or_claim(key, urgent, wait_s)
    if claim is None:
        return hit if hit is not None else _waited_too_long(arch, candidate.kernel_name, version, wait_s)
    try:
        hit = disk_cache.load(key)  # another process compiled it (a restart, the CLI, an earlier run)
        if hit is not None:
            _remember(key, hit)
            claim.result = hit.model_copy(update={"cached": True})
        else:
            claim.result = _compile_claimed(key, candidate, verdict.source, options, kernels, version, timeout_s,
                                            claim.ticket)
        return claim.result
    finally:
        with _CACHE_LOCK:
            _IN_FLIGHT.pop(key, None)
        claim.done.set()


class _Claim:
    """A key's compile under way: its place in the compilers' queue, the event its waiters wait on, and its result
    (which the waiters take, a failure too: a compile that hung for one caller would hang for the next)."""

    def __init__(self, urgent: bool):
        self.ticket, self.done = Ticket(urgent), threading.Event()
        self.result: CompileResult | None = None


def _cached_or_claim(key: str, urgent: bool, wait_s: float) -> tuple[CompileResult | None, _Claim | None]:
    """(a result, None), or (None, a claim): this caller now compiles the key and sets ``claim.done`` when it is
    done; (None, None) when another caller's compile of it outlasted ``wait_s``. A compile of the same key already
    under way is waited for, not run twice beside it (the loop compiles its next candidates ahead, and an evaluation
    that came before such a compile was done used to start its own), and made urgent when this caller is."""
    while True:
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                return hit.model_copy(update={"cached": True}), None
            running = _IN_FLIGHT.get(key)
            if running is None:
                claim = _IN_FLIGHT[key] = _Claim(urgent)
                return None, claim
        if urgent:
            SERVICE.hurry(running.ticket)
        if not running.done.wait(wait_s):
            return None, None
        if running.result is not None:  # else its owner raised: this caller tries, and meets the same
            return running.result.model_copy(update={"cached": True}), None


def _waited_too_long(arch: str, kernel_name: str, version: str, wait_s: float) -> CompileResult:
    return _failed(arch, kernel_name, version, f"NVRTC did not finish within {wait_s:g} s: the same compile, asked "
                   "for earlier by another step, was still running", wait_s * 1000.0)


def _failed(arch: str, kernel_name: str, version: str, log: str, compile_ms: float = 0.0) -> CompileResult:
    """An error result whose log is the whole story (no compiler output to filter)."""
    return CompileResult(ok=False, status="error", arch=arch, kernel_name=kernel_name, log=log, full_log=log,
                         compile_ms=compile_ms, nvrtc_version=version)


def _compile_claimed(key: str, candidate: Candidate, source: str, options: list[str], kernels: list[str],
                     version: str, timeout_s: float | None, ticket: Ticket) -> CompileResult:
    target = options[0].split("=", 1)[1]  # the --gpu-architecture _options chose (sm_90a with --arch-specific)
    result, cacheable = _run_isolated(source, options, target, kernels, version, timeout_s, ticket)
    result = _refuse_shadowed_defines(result, candidate)
    note = clash_note(source, candidate.defines) if not result.ok and candidate.defines else ""
    if note:
        result = result.model_copy(update={"log": cap_log(result.log + note)[0], "full_log": result.full_log + note})
    if not cacheable:  # the compiler was killed or crashed: another try may behave differently
        return result
    _remember(key, result)
    disk_cache.store(key, result)
    return result


@functools.lru_cache(maxsize=64)
def _guard_verdict(source: str) -> GuardVerdict:
    """The include guard's verdict, once per source: an evaluation asks again for every case whose size defines
    differ, and a long source takes milliseconds to tokenise. Read only, never changed, so it can be shared."""
    return check_source(source, PROGRAM_NAME)


def _remember(key: str, result: CompileResult) -> None:
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = result


def _run_isolated(source: str, options: list[str], arch: str, kernels: list[str], version: str,
                  timeout_s: float | None, ticket: Ticket) -> tuple[CompileResult, bool]:
    payload = {"source": source, "options": options, "arch": arch, "kernels": kernels, "version": version}
    raw, failure = SERVICE.compile(payload, timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S, ticket)
    if failure is not None:
        return _failed(arch, kernels[0], version, failure), False
    return CompileResult.model_validate(raw), True


_REDEFINED = re.compile(r'kernel\.cu\(\d+\): warning #47-D: incompatible redefinition of macro "([A-Za-z_]\w*)"')


def _refuse_shadowed_defines(result: CompileResult, candidate: Candidate) -> CompileResult:
    """A source that #defines a name the candidate also sets compiles with the source's value, while launch
    expressions and scratch sizes see the candidate's: a silent disagreement, refused here with NVRTC's line."""
    shadowed = [n for n in dict.fromkeys(_REDEFINED.findall(result.full_log)) if n in candidate.defines]
    if not result.ok or not shadowed:
        return result
    note = "".join(f"\nthe source #defines {n}, which the candidate also sets (-D{n}={candidate.defines[n]}, the value "
                   f"launch expressions see): the kernel would use the source's value; guard it with #ifndef {n} or "
                   "drop one of them" for n in shadowed)
    return result.model_copy(update={"ok": False, "status": "error", "cubin": None, "log": cap_log(result.log + note)[0],
                                     "full_log": result.full_log + note})


ARCH_SPECIFIC = "--arch-specific"  # ours, not NVRTC's: compile for the device's architecture-specific target


def _options(candidate: Candidate, arch: str, source: str) -> list[str]:
    # sm_90a (wgmma, setmaxnreg) on an sm_90 device: the cubin then loads on that architecture only, which is
    # the one it is compiled for anyway
    specific = ARCH_SPECIFIC in candidate.options and not arch.endswith("a")
    opts = [f"--gpu-architecture={arch}{'a' if specific else ''}", "--ptxas-options=-v", "-lineinfo"]
    if not any(o.lstrip("-").startswith("std=") for o in candidate.options):
        opts.append("-std=c++17")
    if any(h in source for h in CUDA_HEADERS):
        include_dir = cuda_include_dir()
        if include_dir:
            opts.append(f"--include-path={include_dir}")
    opts += [f"-D{name}={value}" for name, value in candidate.defines.items()]
    return opts + [o for o in candidate.options if o != ARCH_SPECIFIC]


