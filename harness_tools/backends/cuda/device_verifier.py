"""Outputs compared where they lie, with the reference held on the device (cuda worker side).

A performance case's output can be gigabytes; downloading it and comparing it on the host cost seconds per
configuration (a 6.4 GB log_softmax: 5.6 s of transfers and 3.4 s of comparison, docs/benchmarks.md). Here the
float64 oracle is uploaded once per seed in its device form (:mod:`harness_tools.check.device_reference`) and
each output is compared by a kernel that yields the same statistics as :func:`harness_tools.check.compare.compare`;
only those numbers and the first mismatching element cross to the host.

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

from harness_tools.backends.contract import DeviceCheck, DeviceComparison
from harness_tools.compile.nvrtc import nvrtc_version, run_nvrtc
from harness_tools.errors import BackendError
from harness_tools.task.dtypes import numpy_dtype

log = logging.getLogger(__name__)

# The verdict per element is the host's (compare.py): |got - ref| <= atol + rtol·|ref| in float64, NaN/Inf where
# the reference is finite always failing, and a non-finite reference matched exactly. Every product and sum is
# rounded as written (__dmul_rn, __dadd_rn: no fused multiply-add), so with an exact (float64) reference the
# device's verdict is bit for bit the host's. With a rounded one, an element within `margin` of its threshold
# may go either way: it counts in `possible` if it passed, and not in `certain` if it failed.
SOURCE = r"""
struct Key { unsigned int w[8]; };
struct Stats { unsigned long long mismatches, certain, possible, nonfinite, nans, infs, max_abs, max_rel, first, peek; };

#define QR(a, b, c, d) a += b; d = __funnelshift_l(d ^ a, d ^ a, 16); c += d; b = __funnelshift_l(b ^ c, b ^ c, 12); \
                       a += b; d = __funnelshift_l(d ^ a, d ^ a, 8); c += d; b = __funnelshift_l(b ^ c, b ^ c, 7);

// Words 0..2 of the ChaCha8 block `counter` under `key`: the mask of element `counter`.
__device__ __forceinline__ void keystream(const Key& key, unsigned long long counter, unsigned int out[3])
{
    unsigned int x[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key.w[0], key.w[1], key.w[2], key.w[3],
                          key.w[4], key.w[5], key.w[6], key.w[7], (unsigned int)counter, (unsigned int)(counter >> 32),
                          0u, 0u};
    const unsigned int s0 = x[0], s1 = x[1], s2 = x[2];
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        QR(x[0], x[4], x[8], x[12]) QR(x[1], x[5], x[9], x[13]) QR(x[2], x[6], x[10], x[14]) QR(x[3], x[7], x[11], x[15])
        QR(x[0], x[5], x[10], x[15]) QR(x[1], x[6], x[11], x[12]) QR(x[2], x[7], x[8], x[13]) QR(x[3], x[4], x[9], x[14])
    }
    out[0] = x[0] + s0; out[1] = x[1] + s1; out[2] = x[2] + s2;
}

// The reference value of element i: hi (float32 bits, or float64 as two words) plus the bfloat16 rest lo.
__device__ __forceinline__ double reference(const unsigned int* hi, const unsigned short* lo, int hi_double,
                                            size_t i, const Key& key)
{
    unsigned int m[3];
    keystream(key, i, m);
    double r;
    if (hi_double) {
        const unsigned long long bits = ((unsigned long long)(hi[2 * i + 1] ^ m[1]) << 32) | (hi[2 * i] ^ m[0]);
        r = __longlong_as_double((long long)bits);
    } else {
        r = (double)__uint_as_float(hi[i] ^ m[0]);
    }
    if (lo) r = __dadd_rn(r, (double)__uint_as_float((unsigned int)(lo[i] ^ (unsigned short)m[2]) << 16));
    return r;
}

extern "C" __global__ void cudaopt_mask(unsigned int* hi, unsigned short* lo, int hi_double, size_t n, Key key)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned int m[3];
        keystream(key, i, m);
        if (hi_double) { hi[2 * i] ^= m[0]; hi[2 * i + 1] ^= m[1]; } else { hi[i] ^= m[0]; }
        if (lo) lo[i] ^= (unsigned short)m[2];
    }
}

extern "C" __global__ void cudaopt_peek(const unsigned int* hi, const unsigned short* lo, int hi_double, size_t i,
                                        Key key, Stats* stats)
{
    stats->peek = (unsigned long long)__double_as_longlong(reference(hi, lo, hi_double, i, key));
}

__device__ double half_bits(unsigned int h, int exp_bits, int man_bits, bool has_inf)
{
    const int bias = (1 << (exp_bits - 1)) - 1;
    const unsigned int man = h & ((1u << man_bits) - 1), e = (h >> man_bits) & ((1u << exp_bits) - 1);
    const bool negative = (h >> (exp_bits + man_bits)) & 1u;
    double v;
    if (e == (1u << exp_bits) - 1 && has_inf) v = man ? __longlong_as_double(0x7ff8000000000000ll)
                                                   : __longlong_as_double(0x7ff0000000000000ll);
    else if (!has_inf && e == (1u << exp_bits) - 1 && man == (1u << man_bits) - 1)
        v = __longlong_as_double(0x7ff8000000000000ll);  // e4m3fn: S.1111.111 is its only NaN, and it has no Inf
    else if (e == 0) v = ldexp((double)man, 1 - bias - man_bits);
    else v = ldexp((double)(man | (1u << man_bits)), (int)e - bias - man_bits);
    return negative ? -v : v;
}

__device__ double element(const unsigned char* p, size_t i, int code)
{
    switch (code) {
    case 0: return (double)reinterpret_cast<const float*>(p)[i];
    case 1: return reinterpret_cast<const double*>(p)[i];
    case 2: return half_bits(reinterpret_cast<const unsigned short*>(p)[i], 5, 10, true);
    case 3: return (double)__uint_as_float((unsigned int)reinterpret_cast<const unsigned short*>(p)[i] << 16);
    case 4: return half_bits(p[i], 4, 3, false);
    case 5: return half_bits(p[i], 5, 2, true);
    case 6: return (double)reinterpret_cast<const signed char*>(p)[i];
    case 7: return (double)reinterpret_cast<const short*>(p)[i];
    case 8: return (double)reinterpret_cast<const int*>(p)[i];
    case 9: return __ll2double_rn(reinterpret_cast<const long long*>(p)[i]);
    case 10: return (double)p[i];
    case 11: return (double)reinterpret_cast<const unsigned short*>(p)[i];
    case 12: return (double)reinterpret_cast<const unsigned int*>(p)[i];
    default: return __ull2double_rn(reinterpret_cast<const unsigned long long*>(p)[i]);
    }
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ unsigned long long warp_max(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) { const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o); v = w > v ? w : v; }
    return v;
}

extern "C" __global__ void cudaopt_compare(const unsigned char* __restrict__ got, const unsigned int* __restrict__ hi,
                                           const unsigned short* __restrict__ lo, int code, int hi_double, size_t n,
                                           double atol, double rtol, double rel_bound, double abs_bound, Key key,
                                           Stats* stats)
{
    unsigned long long mismatches = 0, certain = 0, possible = 0, nonfinite = 0, nans = 0, infs = 0;
    unsigned long long first = ~0ull;
    double max_abs = 0.0, max_rel = 0.0;
    const bool exact = rel_bound == 0.0 && abs_bound == 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double g = element(got, i, code);
        const double r = reference(hi, lo, hi_double, i, key);
        const bool rf = isfinite(r), gf = isfinite(g);
        nans += isnan(g);
        infs += isinf(g);
        bool bad, sure, maybe;
        if (!rf) {
            bad = !((isnan(r) && isnan(g)) || r == g);  // a non-finite reference is matched exactly
            sure = maybe = bad;
        } else {
            const double err = fabs(__dadd_rn(g, -r));
            const double thr = __dadd_rn(__dmul_rn(fabs(r), rtol), atol);
            bad = !(err <= thr);  // NaN compares false: NaN is bad
            if (!gf) {
                ++nonfinite;
                sure = maybe = true;
            } else {
                const double margin = exact ? 0.0 : 2.0 * (1.0 + rtol) * __dadd_rn(__dmul_rn(fabs(r), rel_bound), abs_bound)
                                                     + 1.1102230246251565e-16 * thr;
                sure = bad && err > thr + margin;
                maybe = bad || err > thr - margin;
                max_abs = fmax(max_abs, err);
                max_rel = fmax(max_rel, err / fmax(fabs(r), 2.2250738585072014e-308));
            }
        }
        mismatches += bad;
        certain += sure;
        possible += maybe;
        if (bad && i < first) first = i;
    }
    mismatches = warp_sum(mismatches); certain = warp_sum(certain); possible = warp_sum(possible);
    nonfinite = warp_sum(nonfinite); nans = warp_sum(nans); infs = warp_sum(infs);
    unsigned long long abs_bits = warp_max(__double_as_longlong(max_abs));  // non-negative: bits order as values
    unsigned long long rel_bits = warp_max(__double_as_longlong(max_rel));
    for (int o = 16; o > 0; o >>= 1) { const unsigned long long w = __shfl_xor_sync(0xffffffffu, first, o); first = w < first ? w : first; }
    if ((threadIdx.x & 31) == 0) {
        if (mismatches) atomicAdd(&stats->mismatches, mismatches);
        if (certain) atomicAdd(&stats->certain, certain);
        if (possible) atomicAdd(&stats->possible, possible);
        if (nonfinite) atomicAdd(&stats->nonfinite, nonfinite);
        if (nans) atomicAdd(&stats->nans, nans);
        if (infs) atomicAdd(&stats->infs, infs);
        if (abs_bits) atomicMax(&stats->max_abs, abs_bits);
        if (rel_bits) atomicMax(&stats->max_rel, rel_bits);
        if (first != ~0ull) atomicMin(&stats->first, first);
    }
}
"""

KERNELS = ["cudaopt_compare", "cudaopt_mask", "cudaopt_peek"]
CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "float8_e4m3": 4, "float8_e5m2": 5, "int8": 6,
         "int16": 7, "int32": 8, "int64": 9, "uint8": 10, "uint16": 11, "uint32": 12, "uint64": 13}
STATS = 10  # unsigned 64-bit words of the Stats struct: 9 results, then the peeked reference value
NO_INDEX = (1 << 64) - 1
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

    def __init__(self, arch: str, sm_count: int, stream, budget_bytes: int, ok):
        started = time.perf_counter()
        self._ok, self.stream, self.budget, self.blocks = ok, stream, budget_bytes, sm_count * 8
        compiled = run_nvrtc(SOURCE, [f"--gpu-architecture={arch}", "-std=c++17"], arch, KERNELS, nvrtc_version())
        if not compiled.ok or compiled.cubin is None:
            raise BackendError(f"the executor's comparison kernels did not compile:\n{compiled.log}")
        self.module = ok(cu.cuModuleLoadData(compiled.cubin), "cuModuleLoadData(compare)")
        self.fn = {name: ok(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
                   for name in KERNELS}
        self.stats = ok(cu.cuMemAlloc(STATS * 8), "cuMemAlloc(compare stats)")
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
            if words[8] != NO_INDEX:
                result.first_index = words[8]
                result.first_got = self._element(src, dtype, words[8])
                result.first_expected = self._peek(ref, words[8])
        finally:
            if temporary:
                self._wipe(ref)
        result.compare_ms = (time.perf_counter() - started) * 1e3
        return result

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
