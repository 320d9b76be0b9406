"""Outputs compared where they lie, with the reference held on the device (cuda worker side).

A performance case's output can be gigabytes; downloading it and comparing it on the host cost seconds per
configuration (a 6.4 GB log_softmax: 5.6 s of transfers and 3.4 s of comparison, docs/benchmarks.md). Here the
float64 oracle is uploaded once per seed in its device form (:mod:`harness_tools.check.device_reference`) and
each output is compared by a kernel (:mod:`.compare_kernels`) that yields the same statistics as
:func:`harness_tools.check.compare.compare`; only those numbers, the first mismatching element and, for a failing
output, its mismatch map (per-bin counts, a second kernel) cross to the host.

Candidate kernels share the device's address space with the reference: a second context does not separate them
(measured on the H200: a kernel in the primary context read another context's allocation). So the reference is
kept only masked: every word is XORed with a ChaCha8 keystream under a 256-bit key drawn per worker from
os.urandom, which stays in the worker's pageable memory and reaches the device only as kernel parameters of our
own kernels. A kernel that finds the kept buffer reads noise, and knowing some elements (it can compute a few
correctly) does not give the others. The plain reference exists on the device and in our pinned staging buffer
only while the reference is uploaded and masked, when no candidate code runs (the stream is ours, after the
candidate's launches are synchronised); the staging buffer is zeroed afterwards. On a system where kernels can
read pageable host memory (HMM/ATS: CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS), the key would be readable too:
there the verifier is not used and outputs are downloaded (:func:`device_compare_allowed`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from cuda.bindings import driver as cu  # imported by worker processes only

from harness_tools.backends.contract import BinGrid, DeviceCheck, DeviceComparison
from harness_tools.backends.cuda.compare_kernels import CODES, KERNELS, MAP_BINS, NO_INDEX, STATS
from harness_tools.task.dtypes import numpy_dtype

log = logging.getLogger(__name__)

STAGE_BYTES = 64 << 20  # pinned host staging of the upload
THREADS = 256


class _Key(ctypes.Structure):
    _fields_ = [("w", ctypes.c_uint32 * 8)]


def device_compare_allowed(device) -> bool:
    """Whether kernels on ``device`` cannot read pageable host memory (where the mask's key lives)."""
    attribute = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS
    err, value = cu.cuDeviceGetAttribute(attribute, device)
    return err == cu.CUresult.CUDA_SUCCESS and value == 0


@dataclass
class _Reference:
    hi: object
    lo: object | None
    elements: int
    hi_double: bool
    nbytes: int

    def free(self) -> None:
        cu.cuMemFree(self.hi)
        if self.lo is not None:
            cu.cuMemFree(self.lo)


def _ptr(address: int):
    return cu.CUdeviceptr(address)


class DeviceVerifier:
    """The comparison kernels of one context, the mask's key, and the masked references kept (LRU, in bytes)."""

    def __init__(self, cubin: bytes, sm_count: int, stream, budget_bytes: int, ok):
        """``cubin``: :data:`~.compare_kernels.SOURCE` compiled for the device (:mod:`.own_cubins`)."""
        started = time.perf_counter()
        self._ok, self.stream, self.budget, self.blocks = ok, stream, budget_bytes, sm_count * 8
        self.module = ok(cu.cuModuleLoadData(cubin), "cuModuleLoadData(compare)")
        self.fn = {name: ok(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
                   for name in KERNELS}
        self.stats = ok(cu.cuMemAlloc(STATS * 8), "cuMemAlloc(compare stats)")
        self.bins = ok(cu.cuMemAlloc(2 * MAP_BINS * 8), "cuMemAlloc(mismatch map)")
        self.key = _Key((ctypes.c_uint32 * 8).from_buffer_copy(os.urandom(32)))
        self.kept: OrderedDict[tuple, _Reference] = OrderedDict()
        self.bytes = 0
        log.debug("comparison kernels %.3f s", time.perf_counter() - started)

    def compare(self, dtype: str, src, elements: int, check: DeviceCheck) -> DeviceComparison:
        """Compare ``elements`` of ``dtype`` at ``src`` (the candidate's work on it finished) with ``check``'s
        reference. Synchronises the stream."""
        started = time.perf_counter()
        ok = self._ok
        ref, temporary = self._reference(check, elements)
        try:
            ok(cu.cuMemsetD32Async(self.stats, 0, 2 * (STATS - 2), self.stream), "compare reset")
            ok(cu.cuMemsetD32Async(_ptr(int(self.stats) + 8 * (STATS - 2)), 0xFFFFFFFF, 2, self.stream), "reset")
            self._launch("cudaopt_compare", elements, [
                ctypes.c_uint64(int(src)), ctypes.c_uint64(int(ref.hi)), ctypes.c_uint64(int(ref.lo or 0)),
                ctypes.c_int(CODES[dtype]), ctypes.c_int(int(ref.hi_double)), ctypes.c_size_t(elements),
                ctypes.c_double(check.atol), ctypes.c_double(check.rtol), ctypes.c_double(check.rel_bound),
                ctypes.c_double(check.abs_bound), self.key, ctypes.c_uint64(int(self.stats))])
            words = self._stats()
            result = self._result(words, elements, check)
            if result.decided and result.fails(check) and check.bins is not None:
                result.bin_mismatches, result.bin_nonfinite = self._map(dtype, src, ref, elements, check, check.bins)
            if words[8] != NO_INDEX:
                result.first_index = words[8]
                result.first_got = self._element(src, dtype, words[8])
                result.first_expected = self._peek(ref, words[8])
        finally:
            if temporary:
                self._wipe(ref)
        result.compare_ms = (time.perf_counter() - started) * 1e3
        return result

    def _map(self, dtype: str, src, ref: _Reference, elements: int, check: DeviceCheck,
             grid: BinGrid) -> tuple[list[list[int]], list[list[int]]]:
        """(mismatches, NaN/Inf where the reference is finite) per bin of ``grid``: a second pass, for failures only."""
        cells = grid.rows * grid.cols
        if cells > MAP_BINS:
            raise ValueError(f"a mismatch map of {grid.rows} × {grid.cols} bins exceeds the kernel's {MAP_BINS}")
        self._ok(cu.cuMemsetD32Async(self.bins, 0, 4 * cells, self.stream), "mismatch map reset")
        self._launch("cudaopt_mismatch_map", elements, [
            ctypes.c_uint64(int(src)), ctypes.c_uint64(int(ref.hi)), ctypes.c_uint64(int(ref.lo or 0)),
            ctypes.c_int(CODES[dtype]), ctypes.c_int(int(ref.hi_double)), ctypes.c_size_t(elements),
            ctypes.c_double(check.atol), ctypes.c_double(check.rtol), self.key, ctypes.c_size_t(grid.view_rows),
            ctypes.c_size_t(grid.view_cols), ctypes.c_int(grid.rows), ctypes.c_int(grid.cols),
            ctypes.c_uint64(int(self.bins))])
        counts = np.zeros(2 * cells, dtype=np.uint64)
        self._ok(cu.cuMemcpyDtoHAsync(counts.ctypes.data, self.bins, counts.nbytes, self.stream), "mismatch map read")
        self._ok(cu.cuStreamSynchronize(self.stream), "mismatch map")
        mismatches, nonfinite = counts.astype(np.int64).reshape(2, grid.rows, grid.cols)
        return mismatches.tolist(), nonfinite.tolist()

    def _launch(self, name: str, n: int, values: list, blocks: int | None = None) -> None:
        array = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        grid = blocks or max(1, min(self.blocks, -(-n // THREADS)))
        self._ok(cu.cuLaunchKernel(self.fn[name], grid, 1, 1, THREADS if blocks is None else 1, 1, 1, 0, self.stream,
                                   ctypes.addressof(array), 0), f"cuLaunchKernel({name})")

    def _stats(self) -> list[int]:
        words = (ctypes.c_uint64 * STATS)()
        self._ok(cu.cuMemcpyDtoHAsync(ctypes.addressof(words), self.stats, STATS * 8, self.stream), "compare read")
        self._ok(cu.cuStreamSynchronize(self.stream), "output comparison")
        return list(words)

    @staticmethod
    def _result(words: list[int], elements: int, check: DeviceCheck) -> DeviceComparison:
        mismatches, certain, possible, nonfinite, nans, infs, abs_bits, rel_bits = words[:8]
        as_double = lambda bits: float(np.array([bits], dtype=np.uint64).view(np.float64)[0])  # noqa: E731
        decided = nonfinite > 0 or certain > check.max_mismatches or possible <= check.max_mismatches
        out = DeviceComparison(elements=elements, mismatches=mismatches, certain=certain, possible=possible,
                               nonfinite=nonfinite, nans=nans, infs=infs, max_abs_err=as_double(abs_bits),
                               max_rel_err=as_double(rel_bits), decided=decided)
        if nonfinite:
            out.max_abs_err = out.max_rel_err = float("inf")  # as the host reports it
        return out

    def _element(self, src, dtype: str, index: int) -> float:
        itemsize = numpy_dtype(dtype).itemsize
        raw = np.zeros(itemsize, dtype=np.uint8)
        self._ok(cu.cuMemcpyDtoH(raw.ctypes.data, _ptr(int(src) + index * itemsize), itemsize), "read an element")
        return float(raw.view(numpy_dtype(dtype)).astype(np.float64)[0])

    def _peek(self, ref: _Reference, index: int) -> float:
        """The reference value of one (mismatching) element; its slot is cleared again after reading."""
        self._launch("cudaopt_peek", 1, [ctypes.c_uint64(int(ref.hi)), ctypes.c_uint64(int(ref.lo or 0)),
                                         ctypes.c_int(int(ref.hi_double)), ctypes.c_size_t(index), self.key,
                                         ctypes.c_uint64(int(self.stats))], blocks=1)
        value = self._stats()[9]
        self._ok(cu.cuMemsetD32Async(_ptr(int(self.stats) + 8 * (STATS - 1)), 0, 2, self.stream), "clear peek")
        return float(np.array([value], dtype=np.uint64).view(np.float64)[0])

    def _reference(self, check: DeviceCheck, elements: int) -> tuple[_Reference, bool]:
        """(the masked reference of ``check``, whether it is temporary: larger than the whole budget)."""
        files = [check.hi_file] + ([check.lo_file] if check.lo_file else [])
        key = (check.key, *[(os.stat(f).st_ino, os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files])
        kept = self.kept.get(key)
        if kept is not None and kept.elements == elements:
            self.kept.move_to_end(key)
            return kept, False
        hi = np.load(check.hi_file, mmap_mode="r")
        lo = np.load(check.lo_file, mmap_mode="r") if check.lo_file else None
        if hi.dtype not in (np.float32, np.float64) or hi.size != elements or (lo is not None and (
                lo.dtype != np.uint16 or lo.size != elements)):
            raise ValueError(f"reference files of {check.key} do not match an output of {elements} elements")
        nbytes = hi.nbytes + (lo.nbytes if lo is not None else 0)
        temporary = nbytes > self.budget
        while not temporary and self.kept and self.bytes + nbytes > self.budget:
            self._drop(next(iter(self.kept)))
        ref = _Reference(self._upload(hi), self._upload(lo) if lo is not None else None, elements,
                         hi.dtype == np.float64, nbytes)
        self._launch("cudaopt_mask", elements, [ctypes.c_uint64(int(ref.hi)), ctypes.c_uint64(int(ref.lo or 0)),
                                                ctypes.c_int(int(ref.hi_double)), ctypes.c_size_t(elements), self.key])
        self._ok(cu.cuStreamSynchronize(self.stream), "mask the reference")
        if not temporary:
            self.kept[key] = ref
            self.bytes += nbytes
        return ref, temporary

    def _upload(self, array: np.ndarray):
        """A device copy of ``array`` (a memory-mapped file), through a pinned buffer that is zeroed afterwards."""
        flat = array.reshape(-1).view(np.uint8)
        ptr = self._ok(cu.cuMemAlloc(max(flat.size, 16)), "cuMemAlloc(reference)")
        stage_bytes = min(STAGE_BYTES, max(flat.size, 16))
        host = self._ok(cu.cuMemHostAlloc(stage_bytes, 0), "cuMemHostAlloc(reference staging)")
        try:
            stage = np.ctypeslib.as_array((ctypes.c_uint8 * stage_bytes).from_address(int(host)))
            for start in range(0, flat.size, stage_bytes):
                part = flat[start : start + stage_bytes]
                stage[: part.size] = part
                self._ok(cu.cuMemcpyHtoD(_ptr(int(ptr) + start), host, part.size), "upload reference")
            stage[:] = 0
        finally:
            cu.cuMemFreeHost(host)
        return ptr

    def _wipe(self, ref: _Reference) -> None:
        """Free a reference after zeroing it (freed device memory may be handed to the next allocation as it was)."""
        self._ok(cu.cuMemsetD8Async(ref.hi, 0, ref.nbytes if ref.lo is None else ref.elements * 4, self.stream), "wipe")
        if ref.lo is not None:
            self._ok(cu.cuMemsetD8Async(ref.lo, 0, ref.elements * 2, self.stream), "wipe")
        self._ok(cu.cuStreamSynchronize(self.stream), "wipe")
        ref.free()

    def _drop(self, key: tuple) -> None:
        ref = self.kept.pop(key)
        self.bytes -= ref.nbytes
        ref.free()  # masked: nothing to wipe
