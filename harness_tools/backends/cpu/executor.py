"""The ``cpu`` backend, worker side: builds kernels with g++ and runs them on the runtime library.

Runs inside the jailed worker process (launches may corrupt memory, as on a GPU; the kernel is native
code). It never builds: the parent builds each kernel with a jailed g++ and sends its path, and the
kernel cache is read-only in here, so no kernel can change another's library. Buffers come from the
runtime's guarded allocator: [guard page][front pad][data][slack][guard page], pad and slack filled with
the buffer's tail pattern (:mod:`..contract`), so out-of-bounds reads see the pattern, writes into pad or
slack show as a changed pattern and anything further faults on a guard page (reported with the argument's
name, block and thread). The request's placement sets the data's alignment: "guard" (16) ends it within
15 bytes of the guard page, "tail" (256) as cudaMalloc would align it. Timings are wall clock on the CPU
and are labelled ``cpu-wall-clock``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from harness_tools.backends.byte_compare import same_bytes
from harness_tools.backends.contract import (
    POISON_BYTE,
    ArgSpec,
    CaseRequest,
    CaseRun,
    placement_alignment,
    tail_pattern,
    tail_word,
)
from harness_tools.backends.cpu.build import runtime_library
from harness_tools.backends.cpu.translate import needs_fibers
from harness_tools.backends.kernel_args import argument_array
from harness_tools.run.timing import budgeted_warmup, look_due, reps_after_look, summarize
from harness_tools.task.dtypes import numpy_dtype, storable

OK, KERNEL_ERROR, OUT_OF_BOUNDS, CRASH, BAD_LAUNCH = range(5)
_ERROR_NAMES = {KERNEL_ERROR: "CPU_KERNEL_ERROR", OUT_OF_BOUNDS: "CPU_OUT_OF_BOUNDS", CRASH: "CPU_CRASH"}


class Buffer(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("size", ctypes.c_size_t),
                ("front_pad", ctypes.c_size_t), ("slack", ctypes.c_size_t), ("mapping", ctypes.c_void_p),
                ("mapping_size", ctypes.c_size_t)]


class LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("dynamic_shared", ctypes.c_size_t),
                ("use_fibers", ctypes.c_int), ("os_threads", ctypes.c_int), ("buffers", ctypes.POINTER(Buffer)),
                ("buffer_count", ctypes.c_int), ("error", ctypes.c_char_p), ("error_size", ctypes.c_size_t)]


class CpuExecutor:
    def __init__(self, device: int):
        # the parent built the runtime and names it: the cache is read-only in here
        runtime = os.environ.get("CUDAOPT_CPU_RUNTIME") or str(runtime_library())
        self.runtime = ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
        self.runtime.cudaopt_buffer_alloc.argtypes = [ctypes.POINTER(Buffer), ctypes.c_char_p, ctypes.c_size_t,
                                                      ctypes.c_size_t, ctypes.c_uint32]
        self.runtime.cudaopt_buffer_free.argtypes = [ctypes.POINTER(Buffer)]
        self.runtime.cudaopt_runtime_version.restype = ctypes.c_char_p
        self.os_threads = int(os.environ.get("CUDAOPT_CPU_THREADS") or os.cpu_count() or 1)
        self.kernels: OrderedDict[Path, ctypes.CDLL] = OrderedDict()
        self.dead = False

    def info(self) -> dict:
        return {
            "backend": "cpu", "name": f"CPU: {_cpu_model()} ({self.os_threads} threads)", "arch": "sm_90",
            "sm_count": self.os_threads, "driver_version": self.runtime.cudaopt_runtime_version().decode(),
        }

    def run_case(self, payload: dict) -> dict:
        """``payload``: the request's fields plus ``library``, the kernel the parent built (see cpu.py)."""
        library = Path(payload.pop("library"))
        request = CaseRequest.model_validate(payload)
        start = time.perf_counter()
        lib = self._kernel(library)
        entries = [getattr(lib, f"cudaopt_launch_{n}") for n in range(len(request.launches))]
        load_ms = (time.perf_counter() - start) * 1e3
        start = time.perf_counter()
        buffers = self._allocate(request.args, placement_alignment(request.placement))
        problem = self._fill_constants(lib, request.args)
        setup_ms = (time.perf_counter() - start) * 1e3
        try:
            if problem:
                return CaseRun(status="invalid_launch", message=problem, load_ms=load_ms).model_dump()
            return self._run(request, entries, buffers, load_ms, setup_ms).model_dump()
        finally:
            if not self.dead:
                for buf in buffers.values():
                    self.runtime.cudaopt_buffer_free(ctypes.byref(buf))

    def _run(self, request: CaseRequest, entries, buffers: dict[str, Buffer], load_ms: float, setup_ms: float) -> CaseRun:
        table = (Buffer * max(1, len(buffers)))(*buffers.values())
        error = ctypes.create_string_buffer(4096)
        fibers = int(needs_fibers(request.source))
        pointers = {name: buf.data for name, buf in buffers.items()}
        steps = []  # (entry, config, holders, argument array) per launch
        for entry, launch in zip(entries, request.launches):
            config = LaunchConfig((ctypes.c_uint * 3)(*launch.grid), (ctypes.c_uint * 3)(*launch.block),
                                  launch.shared_mem, fibers, self.os_threads, table, len(buffers),
                                  ctypes.cast(error, ctypes.c_char_p), len(error))
            holders, args = argument_array([request.args[i] for i in launch.args], pointers)
            steps.append((entry, config, holders, args))

        def launch_all() -> int:
            for number, (entry, config, _, args) in enumerate(steps):
                code = entry(ctypes.byref(config), args)
                if code != OK:
                    if len(steps) > 1:
                        error.value = (f"launches.{number} ({request.launches[number].kernel_name}): ".encode()
                                       + error.value)[: len(error) - 1]
                    return code
            return OK
        run = CaseRun(status="ok", load_ms=load_ms, setup_ms=setup_ms)
        start = time.perf_counter()
        code = launch_all()
        run.run_ms = (time.perf_counter() - start) * 1e3
        if code != OK:
            return self._failure(code, error.value.decode(errors="replace"), run)
        start = time.perf_counter()
        self._collect(request, buffers, run)
        run.collect_ms = (time.perf_counter() - start) * 1e3
        if request.timing is not None and not run.overruns:
            samples: list[float] = []
            begin = time.perf_counter()
            plan, warmed = request.timing, 0
            warmup, target = plan.warmup, plan.reps
            while len(samples) < target:
                t0 = time.perf_counter()
                code = launch_all()
                if code != OK:
                    return self._failure(code, error.value.decode(errors="replace"), run)
                if warmed < warmup:
                    if warmed == 0:  # the first sizes the rest under a budget, as on a GPU
                        warmup = budgeted_warmup((time.perf_counter() - t0) * 1e3, plan)
                    warmed += 1
                    continue
                samples.append((time.perf_counter() - t0) * 1e3)
                if look_due(len(samples), target, plan):
                    target = reps_after_look(samples, plan)
            run.timing = summarize(samples, clock="cpu-wall-clock", plan=plan, warmup=warmed)
            run.time_ms = (time.perf_counter() - begin) * 1e3
        return run

    def _fill_constants(self, lib, args: list[ArgSpec]) -> str | None:
        """Copy every input that fills a __constant__ symbol into the kernel library's variable."""
        for arg in args:
            if arg.constant is None:
                continue
            size = ctypes.c_ulonglong(0)
            address = lib.cudaopt_constant_lookup(arg.constant.encode(), ctypes.byref(size))
            data = np.load(arg.input_file, mmap_mode="r").reshape(-1).view(np.uint8)
            if not address or size.value != data.size:
                return (f"__constant__ {arg.constant} is {size.value} bytes in the kernel but {arg.name} holds "
                        f"{data.size} bytes: declare it with the buffer's exact size")
            _view(address, data.size)[:] = data
        return None

    def _failure(self, code: int, message: str, run: CaseRun) -> CaseRun:
        if code == BAD_LAUNCH:
            run.status, run.error = "invalid_launch", "CPU_BAD_LAUNCH"
        else:
            run.status, run.error = "launch_error", _ERROR_NAMES.get(code, f"CPU_ERROR_{code}")
        run.message = message
        if code == CRASH:
            self.dead = run.worker_restarted = True  # memory may be corrupt: a fresh worker takes over
            run.message += "; the worker restarts"
        return run

    def _allocate(self, args: list[ArgSpec], alignment: int) -> dict[str, Buffer]:
        buffers: dict[str, Buffer] = {}
        self._names = [a.name.encode() for a in args]  # the runtime keeps pointers to the names
        for arg, name in zip(args, self._names):
            if arg.kind != "buffer" or arg.constant is not None:
                continue
            buf = Buffer()
            nbytes = int(np.prod(arg.shape)) * numpy_dtype(arg.dtype).itemsize
            rc = self.runtime.cudaopt_buffer_alloc(ctypes.byref(buf), name, nbytes, alignment, tail_word(arg.dtype, arg.role))
            if rc != 0:
                raise MemoryError(f"cannot allocate {nbytes} bytes for {arg.name}: {os.strerror(rc)}")
            view = _view(buf.data, nbytes)
            if arg.input_file:
                view[:] = np.load(arg.input_file, mmap_mode="r").reshape(-1).view(np.uint8)
            elif arg.initial is not None:
                view[:] = np.full(arg.shape, arg.initial, dtype=numpy_dtype(arg.dtype)).reshape(-1).view(np.uint8)
            else:
                view[:] = POISON_BYTE
            buffers[arg.name] = buf
        return buffers

    def _collect(self, request: CaseRequest, buffers: dict[str, Buffer], run: CaseRun) -> None:
        out_dir = Path(request.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for arg in request.args:
            if arg.kind != "buffer" or arg.constant is not None:
                continue
            buf = buffers[arg.name]
            if not _surroundings_intact(buf, tail_word(arg.dtype, arg.role)):
                run.overruns.append(arg.name)
            data = _view(buf.data, buf.size).view(numpy_dtype(arg.dtype)).reshape(arg.shape)  # no copy: read before the free
            if arg.role == "in":
                original = np.load(arg.input_file, mmap_mode="r")
                if not same_bytes(data, original):
                    run.modified_inputs.append(arg.name)
            elif arg.role != "scratch":
                path = out_dir / f"{arg.name}.npy"
                np.save(path, storable(data))  # fp8/bf16 as raw records: np.load reads them back
                run.outputs[arg.name] = str(path)

    def _kernel(self, path: Path):
        if path not in self.kernels:
            lib = ctypes.CDLL(str(path))
            for n in range(ctypes.c_int.in_dll(lib, "cudaopt_launch_count").value):
                entry = getattr(lib, f"cudaopt_launch_{n}")
                entry.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p]
                entry.restype = ctypes.c_int
            lib.cudaopt_constant_lookup.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong)]
            lib.cudaopt_constant_lookup.restype = ctypes.c_void_p
            self.kernels[path] = lib
        self.kernels.move_to_end(path)
        return self.kernels[path]


def _surroundings_intact(buf: Buffer, word: int) -> bool:
    """Front pad and slack still hold the pattern the runtime filled them with."""
    pad = _view(buf.data - buf.front_pad, buf.front_pad)
    slack = _view(buf.data + buf.size, buf.slack)
    return bool((pad == tail_pattern(word, pad.size)).all() and (slack == tail_pattern(word, slack.size)).all())


def _view(address: int, nbytes: int) -> np.ndarray:
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
