"""Compiles run at once, each in a compiler child of its own: a long compile does not hold up a short one."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness_tools.compile import compile_candidate
from harness_tools.compile.child import EXECUTOR, _CompileService
from harness_tools.compile.nvrtc import nvrtc_version
from harness_tools.task.candidate import Candidate


def slow_source(levels: int, tag: int) -> str:
    """4**levels initialisers from a few macros: seconds of NVRTC, well within its memory limit."""
    lines = ["#define S0 1,1,1,1"] + [f"#define S{i} S{i - 1},S{i - 1},S{i - 1},S{i - 1}" for i in range(1, levels + 1)]
    return ("\n".join(lines) + f"\n__device__ int table[] = {{ S{levels}, {tag} }};\n"
            'extern "C" __global__ void k(int* x) { x[0] = table[threadIdx.x]; }\n')


def test_a_short_compile_finishes_while_a_long_one_runs(monkeypatch):
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "2")
    launch = {"grid": [1], "block": [1]}
    finished: list[str] = []

    def long_compile() -> None:
        result = compile_candidate(Candidate(source=slow_source(9, time.monotonic_ns()), kernel_name="k",
                                             launch=launch), "sm_90")
        assert result.ok, result.log
        finished.append("long")

    thread = threading.Thread(target=long_compile)
    thread.start()
    time.sleep(1.0)  # the long compile holds a child by now
    short = compile_candidate(Candidate(source=f'extern "C" __global__ void k(int* x) {{ x[0] = {time.monotonic_ns() % 1000}; }}\n',
                                        kernel_name="k", launch=launch), "sm_90")
    finished.append("short")
    thread.join(timeout=120)
    assert short.ok and finished == ["short", "long"]


def _compiler_processes() -> int:
    """Processes running a compiler child here (the jail's and the interpreter inside it)."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and EXECUTOR.encode() in (entry / "cmdline").read_bytes():
                count += 1
        except OSError:
            continue
    return count


def test_children_started_ahead_take_the_first_compiles_and_no_more_start_than_the_capacity(monkeypatch):
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "2")
    service = _CompileService()
    before = _compiler_processes()
    try:
        threads = service.start_ahead(5)
        assert len(threads) == 2  # the capacity bounds it
        for thread in threads:
            thread.join(timeout=120)
        ready = _compiler_processes()
        assert ready > before
        payloads = [{"source": f'extern "C" __global__ void k(int* x) {{ x[0] = {i}; }}\n', "options": ["--gpu-architecture=sm_90"],
                     "arch": "sm_90", "kernels": ["k"], "version": nvrtc_version()} for i in range(2)]
        results: list = []
        compiles = [threading.Thread(target=lambda p=p: results.append(service.compile(p, 60))) for p in payloads]
        for thread in compiles:
            thread.start()
        for thread in compiles:
            thread.join(timeout=120)
        assert [failure for _, failure in results] == [None, None] and all(r["ok"] for r, _ in results)
        assert _compiler_processes() == ready  # both compiles ran on the children started ahead
        assert service.start_ahead(1) == []  # the capacity is taken
    finally:
        service.close()
