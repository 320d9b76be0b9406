"""g++ builds for the cpu backend: the runtime library once per machine, each kernel once per source.

Both are cached by content hash under ``$CUDAOPT_CACHE_DIR/cpu`` (default ``~/.cache/cudaopt/cpu``),
so a kernel seen before loads in milliseconds. Builds write to a temporary name and rename, so two
workers building the same kernel never see a half-written library.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness_tools.backends.contract import CaseRequest
from harness_tools.backends.cpu.translate import launcher, rewrite_dynamic_shared
from harness_tools.errors import BackendUnavailable
from harness_tools.run import jail
from harness_tools.run.jail import JailSpec, Limits
from harness_tools.task.include_guard import NOOP_HEADERS

RUNTIME_DIR = Path(__file__).parent / "runtime"
KERNEL_FLAGS = ["-O2", "-g", "-std=c++17", "-fPIC", "-shared", "-pthread", "-march=native", "-fno-strict-aliasing",
                "-Wno-unknown-pragmas", "-w"]
BUILD_TIMEOUT_S = 180
BUILD_MEMORY_MB = int(os.environ.get("CUDAOPT_COMPILE_MEMORY_MB", "4096"))
LOG_CAP_CHARS = 6000


@dataclass
class KernelBuild:
    ok: bool
    path: Path | None
    log: str
    build_ms: float
    cached: bool


def cache_root() -> Path:
    root = Path(os.environ.get("CUDAOPT_CACHE_DIR") or Path.home() / ".cache" / "cudaopt") / "cpu"
    root.mkdir(parents=True, exist_ok=True)
    return root


def compiler() -> tuple[str, str]:
    """(path, version line) of the C++ compiler; g++ 12 or newer is required."""
    return _compiler(os.environ.get("CXX", "g++"), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _compiler(name: str, search_path: str) -> tuple[str, str]:
    """Asked once per compiler name and PATH: every case's build key needs it (a g++ run was 1.7 ms of each)."""
    cxx = shutil.which(name, path=search_path or None)
    if not cxx:
        raise BackendUnavailable("the cpu backend needs g++ (12 or newer) on PATH; install it, e.g. apt install g++")
    version = subprocess.run([cxx, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True).stdout.strip()
    major = int(re.match(r"\d+", version).group(0)) if re.match(r"\d+", version) else 0
    if major < 12:
        raise BackendUnavailable(f"the cpu backend needs g++ 12 or newer, found {cxx} {version}")
    return cxx, f"{cxx} {version}"


def _machine_key() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), "")
    except OSError:
        model = ""
    return f"{cpu}|{model}|{compiler()[1]}"


def runtime_defines() -> list[str]:
    """``CUDAOPT_CPU_FORCE_UCONTEXT=1`` builds the portable ucontext fibers instead of the x86-64 switch."""
    return ["-DCUDAOPT_CPU_FORCE_UCONTEXT"] if os.environ.get("CUDAOPT_CPU_FORCE_UCONTEXT") == "1" else []


def runtime_hash() -> str:
    digest = hashlib.sha256((_machine_key() + " ".join(runtime_defines())).encode())
    for path in sorted(RUNTIME_DIR.iterdir()):
        if path.suffix in (".h", ".cpp", ".S"):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def runtime_library() -> Path:
    """Build (once) and return libcudaopt_cpu.so."""
    target = cache_root() / f"runtime-{runtime_hash()}" / "libcudaopt_cpu.so"
    if target.is_file():
        return target
    cxx, _ = compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{os.getpid()}.libcudaopt_cpu.so")
    sources = [str(p) for p in sorted(RUNTIME_DIR.glob("*.cpp")) + sorted(RUNTIME_DIR.glob("*.S"))]
    cmd = [cxx, "-O2", "-g", "-std=c++17", "-fPIC", "-shared", "-pthread", *runtime_defines(), f"-I{RUNTIME_DIR}",
           *sources, "-o", str(tmp)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if out.returncode != 0:
        raise BackendUnavailable(f"building the cpu runtime failed:\n{out.stderr[-4000:]}")
    os.replace(tmp, target)
    return target


def stub_include_dir() -> Path:
    """Empty versions of the CUDA headers a kernel may include (NVRTC needs none of them either)."""
    folder = cache_root() / "stub-include"
    folder.mkdir(parents=True, exist_ok=True)
    for name in NOOP_HEADERS:
        path = folder / name
        if not path.exists():
            path.write_text("#pragma once\n")
    return folder


def compiler_home() -> tuple[str, ...]:
    """Where the compiler lives when that is outside the system folders (a toolchain in /opt, say): every
    jail that builds with it or loads what it built (its libstdc++, libtsan) needs it, read-only."""
    home = Path(compiler()[0]).resolve().parent.parent
    return () if str(home) in ("/", "/usr", "/usr/local") else (str(home),)


def build_jail(build_dir: str | Path, *read_only: str | Path) -> JailSpec:
    """g++ on candidate source: system folders, our runtime's headers and ``read_only``; writes only ``build_dir``."""
    home = compiler_home()
    return JailSpec(purpose="g++", python=False,
                    read_only=(str(RUNTIME_DIR), str(stub_include_dir()), *home, *map(str, read_only)),
                    writable=(str(build_dir),),
                    env={"PATH": os.pathsep.join([*(f"{h}/bin" for h in home), "/usr/local/bin:/usr/bin:/bin"])},
                    limits=Limits(address_space=BUILD_MEMORY_MB << 20, cpu_seconds=BUILD_TIMEOUT_S + 5, processes=64))


def run_build(cmd: list[str], build_dir: str | Path, *read_only: str | Path) -> tuple[int | None, str]:
    """(exit code or None after BUILD_TIMEOUT_S, stderr) of one jailed g++ command run in ``build_dir``."""
    code, _out, err = jail.run(cmd, build_jail(build_dir, *read_only), BUILD_TIMEOUT_S, cwd=str(build_dir))
    return code, err


def build_kernel(request: CaseRequest) -> KernelBuild:
    """Compile one candidate into a shared object exporting ``cudaopt_launch``; a g++ error is data.

    g++ runs jailed (it reads the candidate's ``#line`` files and includes; its output is native code we run
    later), writing only its own build folder; this process then copies the library into the cache."""
    library = runtime_library()
    unit = '#line 1 "kernel.cu"\n' + rewrite_dynamic_shared(request.source) + launcher(request)
    flags = list(KERNEL_FLAGS)
    if any(o.lstrip("-") == "use_fast_math" for o in request.options):
        flags.append("-ffast-math")
    flags += [f"-D{k}={v}" for k, v in sorted(request.defines.items())]
    key = hashlib.sha256("\0".join([unit, *flags, library.parent.name]).encode()).hexdigest()[:24]
    target = kernel_cache() / f"{key}.so"
    if target.is_file():
        return KernelBuild(True, target, "", 0.0, True)
    cxx, _ = compiler()
    with tempfile.TemporaryDirectory(prefix="cudaopt-cpu-") as tmp:
        (Path(tmp) / "kernel.cpp").write_text(unit)
        cmd = [cxx, *flags, "-include", "cudaopt_cpu.h", f"-I{stub_include_dir()}", f"-I{RUNTIME_DIR}", "kernel.cpp",
               f"-L{library.parent}", "-lcudaopt_cpu", f"-Wl,-rpath,{library.parent}", "-o", "kernel.so"]
        start = time.perf_counter()
        code, stderr = run_build(cmd, tmp, library.parent)
        elapsed = (time.perf_counter() - start) * 1e3
        if code is None:
            return KernelBuild(False, None, f"g++ did not finish within {BUILD_TIMEOUT_S} s", elapsed, False)
        if code != 0:
            return KernelBuild(False, None, cap_log(build_failure(code, stderr, tmp)), elapsed, False)
        tmp_target = target.with_name(f".{os.getpid()}.{target.name}")
        shutil.copyfile(Path(tmp) / "kernel.so", tmp_target)
        os.replace(tmp_target, target)
    return KernelBuild(True, target, "", elapsed, False)


def kernel_cache() -> Path:
    """Built kernels, by content hash: written by this process only, read-only inside every jail."""
    folder = cache_root() / "kernels"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def build_failure(code: int, stderr: str, tmp: str) -> str:
    """What to tell the caller about a failed g++ run: its kernel.cu diagnostics, and the memory limit
    when that is what stopped it (the raw message names cc1plus, not kernel.cu, so it is read here)."""
    diagnostics = compiler_diagnostics(stderr, tmp)
    if code < 0 or re.search(r"out of memory|virtual memory exhausted|Killed signal", stderr):
        return (f"{diagnostics}\ng++ stopped (exit {code}): it hit its memory limit of {BUILD_MEMORY_MB} MiB "
                "(CUDAOPT_COMPILE_MEMORY_MB) or was killed; a source that needs more is stopped there").strip()
    return diagnostics


def compiler_diagnostics(stderr: str, tmp: str) -> str:
    """g++'s diagnostics located in kernel.cu (with the lines under them), paths shortened; no other.

    g++ quotes the lines of the file a diagnostic is located in, so one located anywhere else ("In file
    included from", a header's note, a renamed file) is dropped whole. Lines split at LF only, so a CR or
    form feed inside a quoted line cannot start a forged ``kernel.cu:1:`` line.
    """
    kept, dropped, keep = [], 0, False
    for line in stderr.replace("\x00", "").split("\n"):
        if line[:1] not in ("", " ", "\t"):  # a new diagnostic; indented lines belong to the one above
            # bwrap's own complaints (a compiler it cannot start) are about the set-up, never the source
            keep = re.match(r"kernel\.cu:(?:[0-9]+:(?:[0-9]+:)?)? |bwrap: ", line) is not None
            dropped += not keep
        if keep:
            kept.append(line.rstrip("\r").replace(tmp + "/", "").replace(str(RUNTIME_DIR) + "/", ""))
    if dropped:
        kept.append(f"[{dropped} diagnostic line(s) not located in kernel.cu omitted]")
    return "\n".join(kept).strip()


def cap_log(text: str) -> str:
    return text if len(text) <= LOG_CAP_CHARS else text[: LOG_CAP_CHARS - 100] + "\n… [log truncated]"
