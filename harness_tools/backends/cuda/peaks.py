"""The device's measured peaks, the roofs of a roofline: copy bandwidth and FP32 FMA throughput (DeviceInfo).

Measured, not taken from a datasheet: a roofline against the datasheet's numbers puts every kernel some way
below roofs nothing reaches, while measured ones say what this device does at its clocks now. Once per worker
(:meth:`harness_tools.backends.cuda.executor.CudaExecutor.info`), in a few milliseconds:

- copy: ``cudaopt_peak_copy`` from one 256 MiB buffer to another (far past any L2), bytes read plus bytes
  written per second, in GB/s (1e9 bytes/s). Where the device has no room for them, halves are tried down to
  twice the L2's size, then it is left unmeasured (None);
- FP32: ``cudaopt_peak_fma`` on a full wave of blocks, an FMA counted as 2 FLOPs, in TFLOP/s.

Each is the median of 5 launches timed with CUDA events after a warm-up, without an L2 flush (the copy's
buffers are far larger than the L2; the FMAs touch no memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cuda.bindings import driver as cu  # imported by worker processes only

from harness_tools.backends.cuda.device_kernels import DeviceKernels
from harness_tools.run.timing import TimingPlan

PLAN = TimingPlan(warmup=2, reps=5, flush_l2=False)
COPY_BYTES = 256 << 20  # per buffer
FMA_ITERATIONS = 8192  # about 0.6 ms a launch on an H200

MedianMs = Callable[[Callable[[], None], TimingPlan], float]  # the median event time of a launch, timed by plan


@dataclass(frozen=True)
class Peaks:
    copy_gbps: float | None = None
    fp32_tflops: float | None = None


def measure_peaks(kernels: DeviceKernels, l2_bytes: int, median_ms: MedianMs, ok) -> Peaks:
    """Both peaks of the device ``kernels`` run on (the module docstring's method)."""
    return Peaks(copy_gbps=_copy_gbps(kernels, l2_bytes, median_ms, ok), fp32_tflops=_fp32_tflops(kernels, median_ms))


def _copy_gbps(kernels: DeviceKernels, l2_bytes: int, median_ms: MedianMs, ok) -> float | None:
    nbytes = max(COPY_BYTES, -(-2 * l2_bytes // 16) * 16)
    while nbytes >= 2 * l2_bytes:
        src, dst = _alloc(nbytes), _alloc(nbytes)
        try:
            if src is not None and dst is not None:
                ok(cu.cuMemsetD32Async(src, 0, nbytes // 4, kernels.stream), "clear copy source")
                ms = median_ms(lambda: kernels.copy(dst, src, nbytes), PLAN)
                return 2 * nbytes / (ms * 1e-3) / 1e9 if ms > 0 else None
        finally:
            for buffer in (src, dst):
                if buffer is not None:
                    cu.cuMemFree(buffer)
        nbytes //= 2
    return None


def _fp32_tflops(kernels: DeviceKernels, median_ms: MedianMs) -> float | None:
    ms = median_ms(lambda: kernels.fma(FMA_ITERATIONS), PLAN)
    return kernels.fma_flops(FMA_ITERATIONS) / (ms * 1e-3) / 1e12 if ms > 0 else None


def _alloc(nbytes: int):
    """A device buffer, or None where there is no room (an expected failure: the device is shared or small)."""
    err, ptr = cu.cuMemAlloc(nbytes)
    return ptr if err == cu.CUresult.CUDA_SUCCESS else None
