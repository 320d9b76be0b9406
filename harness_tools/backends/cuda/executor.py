"""The ``cuda`` backend, worker side: CUDA Driver API calls through ``cuda.bindings.driver``.

Imported only inside the worker process (see :mod:`harness_tools.run.worker`). One instance owns the
primary context of one device, a stream, an L2-flush buffer, a small module cache, its helper kernels
(:mod:`.device_kernels`), the inputs kept on the device (:mod:`.resident_inputs`) and the placement of
each case's buffers (:mod:`.device_buffers`: "guard" ends each at an unmapped page for validation cases,
"tail" keeps cudaMalloc's alignment and a checked tail for timed ones). After a sticky
error (illegal address, trap, launch failure, ...) the context is unusable: the instance sets
``dead`` and the process exits once its answer is sent.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from cuda.bindings import driver as cu  # imported by worker processes only

from harness_tools.backends.contract import (
    EVIDENCE_BYTES,
    POISON_BYTE,
    ArgSpec,
    CaseRequest,
    CaseRun,
    DeviceComparison,
    KernelLaunch,
    tail_word,
)
from harness_tools.backends.cuda.compare_kernels import KERNELS as COMPARE_KERNELS
from harness_tools.backends.cuda.compare_kernels import SOURCE as COMPARE_SOURCE
from harness_tools.backends.cuda.device_buffers import BufferPlacer, DeviceBuffer
from harness_tools.backends.cuda.device_kernels import KERNELS as HELPER_KERNELS
from harness_tools.backends.cuda.device_kernels import SOURCE as HELPER_SOURCE
from harness_tools.backends.cuda.device_kernels import DeviceKernels
from harness_tools.backends.cuda.device_verifier import DeviceVerifier, device_compare_allowed
from harness_tools.backends.cuda.own_cubins import OwnCubin
from harness_tools.backends.cuda.peaks import Peaks, measure_peaks
from harness_tools.backends.cuda.resident_inputs import ResidentInputs
from harness_tools.backends.kernel_args import argument_array
from harness_tools.run.timing import TimingPlan, measure, summarize
from harness_tools.task.dtypes import numpy_dtype, storage_dtype

# Errors after which the context is corrupt and the process must end (CUDA driver API docs).
STICKY = {700, 702, 709, 710, 714, 715, 716, 717, 718, 719, 721, 999}
ILLEGAL_ADDRESS = 700
GUARD_HINT = ("; this case's buffers each end at an unmapped page, so an access just outside a buffer argument "
              "faults like this (the sanitize inspection names the argument)")
FLOOR_PLAN = TimingPlan(warmup=10, reps=100)
log = logging.getLogger(__name__)


class CudaFailure(Exception):
    def __init__(self, code: int, name: str, where: str):
        self.code, self.name, self.where = code, name, where
        super().__init__(f"{where}: {name}")


def _ok(result, where: str):
    """Unpack a cuda.bindings result tuple, raising CudaFailure on an error code."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        raise CudaFailure(int(err), name.decode() if name else str(err), where)
    return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)


class CudaExecutor:
    def __init__(self, device: int):
        started = time.perf_counter()
        _ok(cu.cuInit(0), "cuInit")
        self.device = _ok(cu.cuDeviceGet(device), "cuDeviceGet")
        attr = cu.CUdevice_attribute
        major = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = self._attr(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        self.arch = f"sm_{major}{minor}"
        # our own kernels compile while the context is made (NVRTC needs no context and releases the GIL)
        helpers = OwnCubin(HELPER_SOURCE, HELPER_KERNELS, self.arch, "helper kernels")
        self._compare_cubin = OwnCubin(COMPARE_SOURCE, COMPARE_KERNELS, self.arch, "comparison kernels")
        self.context = _ok(cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        _ok(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = _ok(cu.cuStreamCreate(1), "cuStreamCreate")  # non-blocking
        self.sm_count = self._attr(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.l2_bytes = self._attr(attr.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        self.shared_optin = self._attr(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        # At least twice the L2 and no less than the 256 MB triton's do_bench clears, so both methods
        # start each launch from the same cache state.
        self.flush_bytes = max(2 * self.l2_bytes, 256 << 20)
        self.flush_buffer = _ok(cu.cuMemAlloc(self.flush_bytes), "cuMemAlloc(flush)")
        _ok(cu.cuMemsetD32Async(self.flush_buffer, 0, self.flush_bytes // 4, self.stream), "clear flush buffer")
        _ok(cu.cuStreamSynchronize(self.stream), "clear flush buffer")
        context_s = time.perf_counter() - started  # a respawn's cost after a kill: logged, CUDAOPT_LOG=DEBUG
        self.kernels = DeviceKernels(helpers.cubin(), self.sm_count, self.stream, _ok)
        log.debug("context and flush buffer %.3f s, helper kernels %.3f s", context_s,
                  time.perf_counter() - started - context_s)
        self.placer = BufferPlacer(device, self.kernels, _ok)
        memory = int(_ok(cu.cuDeviceTotalMem(self.device), "cuDeviceTotalMem"))
        self.resident = ResidentInputs(self.kernels, min(memory // 8, 8 << 30), _ok)
        self.reference_budget = min(memory // 8, 16 << 30)
        self.verifier: DeviceVerifier | None = None  # made on the first output compared on the device
        self.compare_here = device_compare_allowed(self.device)
        if not self.compare_here:
            log.info("kernels on this GPU can read pageable host memory (HMM/ATS): outputs are downloaded and "
                     "compared on the host, since the reference's mask key could be read here")
        self.modules: OrderedDict[str, tuple[object, object]] = OrderedDict()
        self.events: list[tuple[object, object]] = []
        self.dead = False
        self.timing_floor_ms: float | None = None  # measured by info(): the worker's, not a tool's launcher
        self.peaks: Peaks | None = None  # likewise

    def _timing_floor(self) -> float:
        """Median event time of an empty kernel timed exactly as a candidate is (a few milliseconds, once per
        worker; not in processes under compute-sanitizer, where each 256 MB flush read would be instrumented)."""
        return self._median_ms(self.kernels.launch_empty, FLOOR_PLAN)

    def _median_ms(self, launch: Callable[[], None], plan: TimingPlan) -> float:
        return statistics.median(measure(_EventTimer(self, launch, plan.reps), plan).samples_ms)

    def _peaks(self) -> Peaks:
        """The device's measured copy bandwidth and FP32 throughput (:mod:`.peaks`), None each where they could
        not be measured: a roofline's roofs are no reason to fail the worker."""
        started = time.perf_counter()
        try:
            peaks = measure_peaks(self.kernels, self.l2_bytes, self._median_ms, _ok)
        except CudaFailure as failure:
            if failure.code in STICKY:
                raise
            log.warning("the device's peaks could not be measured: %s", failure)
            peaks = Peaks()
        log.debug("peaks %.3f s", time.perf_counter() - started)
        return peaks

    def _uuid(self) -> str | None:
        """GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it; None if the driver will not say."""
        try:
            raw = bytes(_ok(cu.cuDeviceGetUuid(self.device), "cuDeviceGetUuid").bytes)[:16]
        except Exception:  # an identity is a label on the record: its absence must not stop the worker
            log.warning("cuDeviceGetUuid failed", exc_info=True)
            return None
        text = raw.hex()
        return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    def _attr(self, attribute) -> int:
        return int(_ok(cu.cuDeviceGetAttribute(attribute, self.device), "cuDeviceGetAttribute"))

    def info(self) -> dict:
        from cuda.bindings import __version__ as bindings_version

        name = _ok(cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        if self.timing_floor_ms is None:
            started = time.perf_counter()
            self.timing_floor_ms = self._timing_floor()
            log.debug("timing floor %.3f s", time.perf_counter() - started)
        if self.peaks is None:  # before the free memory is read: its buffers are freed by then
            self.peaks = self._peaks()
        driver = int(_ok(cu.cuDriverGetVersion(), "cuDriverGetVersion"))
        return {
            "backend": "cuda", "name": name.split(b"\0", 1)[0].decode(), "arch": self.arch,
            "sm_count": self.sm_count, "l2_bytes": self.l2_bytes,
            "memory_bytes": int(_ok(cu.cuDeviceTotalMem(self.device), "cuDeviceTotalMem")),
            # what a case may still use: free now, less what the kept inputs and references may take later
            "memory_free_bytes": max(0, int(_ok(cu.cuMemGetInfo(), "cuMemGetInfo")[0]) - self.resident.budget
                                     - self.reference_budget),
            "max_shared_per_block_optin": self.shared_optin,
            "driver_version": f"{driver // 1000}.{driver % 1000 // 10}", "bindings_version": bindings_version,
            "uuid": self._uuid(),
            "timing_floor_ms": self.timing_floor_ms,
            "peak_copy_gbps": self.peaks.copy_gbps, "peak_fp32_tflops": self.peaks.fp32_tflops,
        }

    # ---- one case -------------------------------------------------------------------------------
    def run_case(self, payload: dict) -> dict:
        request = CaseRequest.model_validate(payload)
        buffers: list[tuple[ArgSpec, DeviceBuffer, int | None]] = []
        run = CaseRun(status="ok")
        try:
            start = time.perf_counter()
            module, functions = self._functions(request)
            run.load_ms = (time.perf_counter() - start) * 1e3
            problem = self._check_launches(functions, request)
            if problem:
                return CaseRun(status="invalid_launch", message=problem, load_ms=run.load_ms).model_dump()
            start = time.perf_counter()
            buffers = self._allocate(request, buffers)
            problem = self._fill_constants(module, request)
            if problem:
                return CaseRun(status="invalid_launch", message=problem, load_ms=run.load_ms).model_dump()
            run.setup_ms = (time.perf_counter() - start) * 1e3
            pointers = {arg.name: buf.data for arg, buf, _ in buffers}
            arrays = [argument_array([request.args[i] for i in launch.args], pointers) for launch in request.launches]

            def launch_all() -> None:
                for launch, function, (_, array) in zip(request.launches, functions, arrays):
                    self._launch(function, launch, ctypes.addressof(array), len(request.launches) > 1)
            start = time.perf_counter()
            launch_all()
            _ok(cu.cuStreamSynchronize(self.stream), "kernel execution")
            run.run_ms = (time.perf_counter() - start) * 1e3
            start = time.perf_counter()
            self._collect(request, buffers, run)
            run.collect_ms = (time.perf_counter() - start) * 1e3
            if request.timing is not None:
                start = time.perf_counter()
                samples, warmup = measure(_EventTimer(self, launch_all, request.timing.reps), request.timing)
                run.timing = summarize(samples, plan=request.timing, warmup=warmup)
                run.time_ms = (time.perf_counter() - start) * 1e3
        except CudaFailure as failure:
            run.status = "launch_error"
            run.error = failure.name
            run.message = f"{failure.where} failed with {failure.name} ({failure.code})"
            if failure.code in STICKY or not self._context_healthy():
                self.dead = True
                run.worker_restarted = True
                run.message += "; the CUDA context is lost, the worker restarts"
            if failure.code == ILLEGAL_ADDRESS and request.placement == "guard" and self.placer.vmm:
                run.message += GUARD_HINT
        finally:
            if not self.dead:
                for _, buf, _ in buffers:
                    buf.free()
        return run.model_dump()

    def _functions(self, request: CaseRequest):
        """(module, the function of every launch): the module is loaded once per cubin and kept (LRU)."""
        key = hashlib.sha256(request.cubin).hexdigest()
        if key in self.modules:
            self.modules.move_to_end(key)
        else:
            image = np.frombuffer(request.cubin, dtype=np.uint8)
            self.modules[key] = (_ok(cu.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData"), {})
            if len(self.modules) > 32:
                _, (old, _) = self.modules.popitem(last=False)
                cu.cuModuleUnload(old)
        module, functions = self.modules[key]
        for launch in request.launches:
            if launch.symbol not in functions:
                functions[launch.symbol] = _ok(cu.cuModuleGetFunction(module, launch.symbol.encode()),
                                               f"cuModuleGetFunction({launch.kernel_name})")
        return module, [functions[launch.symbol] for launch in request.launches]

    def _check_launches(self, functions, request: CaseRequest) -> str | None:
        for index, (function, launch) in enumerate(zip(functions, request.launches)):
            problem = self._check_launch(function, launch)
            if problem:
                return f"launches.{index} ({launch.kernel_name}): {problem}" if len(request.launches) > 1 else problem
        return None

    def _check_launch(self, function, launch: KernelLaunch) -> str | None:
        fa = cu.CUfunction_attribute
        threads = launch.block[0] * launch.block[1] * launch.block[2]
        limit = int(_ok(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function), "attr"))
        regs = int(_ok(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_NUM_REGS, function), "attr"))
        if threads > limit:
            return f"block of {threads} threads exceeds this kernel's limit of {limit} ({regs} registers per thread)"
        static = int(_ok(cu.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function), "attr"))
        if static + launch.shared_mem > self.shared_optin:
            return (f"{static} B static + {launch.shared_mem} B dynamic shared memory exceeds the "
                    f"{self.shared_optin} B a block may use on this GPU")
        _ok(cu.cuFuncSetAttribute(function, fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  launch.shared_mem), "cuFuncSetAttribute(dynamic shared)")
        return None

    def _fill_constants(self, module, request: CaseRequest) -> str | None:
        """Copy every input that fills a __constant__ symbol into it (on the stream, before any launch)."""
        for arg in request.args:
            if arg.constant is None:
                continue
            nbytes = int(np.prod(arg.shape)) * numpy_dtype(arg.dtype).itemsize
            err, ptr, size = cu.cuModuleGetGlobal(module, arg.constant.encode())
            if err != cu.CUresult.CUDA_SUCCESS:
                return (f"the source declares no __constant__ symbol {arg.constant!r} (the task fills it from "
                        f"{arg.name}); declare it at namespace scope, e.g. __constant__ float {arg.constant}[N]")
            if int(size) != nbytes:
                return (f"__constant__ {arg.constant} is {int(size)} bytes in the kernel but {arg.name} holds {nbytes} "
                        "bytes: declare it with the buffer's exact size")
            self.resident.fill(ptr, arg.input_file, nbytes)
        return None

    def _allocate(self, request: CaseRequest, buffers: list):
        """Fills ``buffers`` (so a failure part-way still frees what exists) with (arg, buffer, digest of an
        input as uploaded) per buffer argument, placed as the request says, surroundings filled with its pattern.

        Every copy and memset goes on the executor's stream: it does not synchronise with the legacy default
        stream, so set-up work issued there could still be running when the kernel starts (a race that
        corrupted inputs and outputs now and then)."""
        for arg in request.args:
            if arg.kind != "buffer" or arg.constant is not None:
                continue
            nbytes = int(np.prod(arg.shape)) * numpy_dtype(arg.dtype).itemsize
            buf = self.placer.allocate(nbytes, request.placement, arg.name)
            buffers.append((arg, buf, None))
            ptr = cu.CUdeviceptr(buf.data)
            self.placer.fill(buf, tail_word(arg.dtype, arg.role))
            digest = None
            if arg.input_file:
                digest = self.resident.fill(ptr, arg.input_file, nbytes)
            elif arg.initial is not None:
                host = np.full(arg.shape, arg.initial, dtype=numpy_dtype(arg.dtype))
                _ok(cu.cuMemcpyHtoDAsync(ptr, host.ctypes.data, nbytes, self.stream), f"upload {arg.name}")
                digest = self.kernels.digest(ptr, nbytes)
            elif nbytes:
                _ok(cu.cuMemsetD8Async(ptr, POISON_BYTE, nbytes, self.stream), f"poison {arg.name}")
            buffers[-1] = (arg, buf, digest if arg.role == "in" else None)
        _ok(cu.cuStreamSynchronize(self.stream), "buffer set-up")
        return buffers

    def _launch(self, function, launch: KernelLaunch, params: int, named: bool = False) -> None:
        g, b = launch.grid, launch.block
        _ok(cu.cuLaunchKernel(function, g[0], g[1], g[2], b[0], b[1], b[2], launch.shared_mem, self.stream,
                              params, 0), f"cuLaunchKernel({launch.kernel_name})" if named else "cuLaunchKernel")

    def _collect(self, request: CaseRequest, buffers, run: CaseRun) -> None:
        """Download outputs, then check surroundings and inputs: all before any timing launch."""
        out_dir = Path(request.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for arg, buf, digest in buffers:
            if not self.placer.intact(buf, tail_word(arg.dtype, arg.role)):
                run.overruns.append(arg.name)
            ptr = cu.CUdeviceptr(buf.data)
            if arg.role == "in":
                if self.kernels.digest(ptr, buf.nbytes) != digest:
                    run.modified_inputs.append(arg.name)
            elif arg.role != "scratch":
                comparison = self._compare_here(arg, ptr) if arg.check is not None else None
                if comparison is not None:
                    run.comparisons[arg.name] = comparison
                evidence = comparison is not None and comparison.fails(arg.check) and buf.nbytes <= EVIDENCE_BYTES
                if comparison is None or not comparison.decided or evidence:
                    run.outputs[arg.name] = self._download(arg, ptr, buf.nbytes, out_dir / f"{arg.name}.npy")

    def _compare_here(self, arg: ArgSpec, ptr) -> DeviceComparison | None:
        """The device's comparison of one output, or None when the verifier could not run it (then the output is
        downloaded: a verifier out of memory is not the candidate's failure)."""
        assert arg.check is not None
        if not self.compare_here:
            return None
        try:
            return self._verifier().compare(arg.dtype, ptr, int(np.prod(arg.shape)), arg.check)
        except CudaFailure as failure:
            if failure.code in STICKY:
                raise
            log.warning("comparing %s on the device failed (%s); comparing it on the host", arg.name, failure)
            return None

    def _verifier(self) -> DeviceVerifier:
        if self.verifier is None:
            self.verifier = DeviceVerifier(self._compare_cubin.cubin(), self.sm_count, self.stream,
                                           self.reference_budget, _ok)
        return self.verifier

    @staticmethod
    def _download(arg: ArgSpec, ptr, nbytes: int, path: Path) -> str:
        """Straight into the .npy file's mapping (no second host copy); the file usually lives in memory."""
        if nbytes == 0:
            np.save(path, np.empty(arg.shape, dtype=storage_dtype(arg.dtype)))
            return str(path)
        # fp8/bf16 as raw records (storage_dtype): np.load reads them back
        out = np.lib.format.open_memmap(path, mode="w+", dtype=storage_dtype(arg.dtype), shape=tuple(arg.shape))
        _ok(cu.cuMemcpyDtoH(out.ctypes.data, ptr, nbytes), f"download {arg.name}")
        out.flush()
        del out
        return str(path)

    def _context_healthy(self) -> bool:
        try:
            _ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
            return True
        except CudaFailure:
            return False

    def event_pairs(self, count: int) -> list[tuple[object, object]]:
        while len(self.events) < count:
            self.events.append((_ok(cu.cuEventCreate(0), "cuEventCreate"), _ok(cu.cuEventCreate(0), "cuEventCreate")))
        return self.events[:count]


class _EventTimer:
    """:class:`harness_tools.run.timing.DeviceTimer` over CUDA events on the executor's stream."""

    def __init__(self, executor: CudaExecutor, launch: Callable[[], None], reps: int):
        self.ex, self.launch = executor, launch
        self.pairs = executor.event_pairs(reps)

    def flush_l2(self) -> None:
        self.ex.kernels.evict_l2(self.ex.flush_buffer, self.ex.flush_bytes)

    def record(self, index: int, which: int) -> None:
        _ok(cu.cuEventRecord(self.pairs[index][which], self.ex.stream), "cuEventRecord")

    def elapsed_ms(self, count: int) -> list[float]:
        _ok(cu.cuStreamSynchronize(self.ex.stream), "timed launches")
        elapsed = getattr(cu, "cuEventElapsedTime_v2", None) or cu.cuEventElapsedTime
        return [float(_ok(elapsed(s, e), "cuEventElapsedTime")) for s, e in self.pairs[:count]]

