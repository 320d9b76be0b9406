"""The kernels of the device comparison (:mod:`.device_verifier` compiles and launches them): the mask of the held
reference, a peek at one of its elements, the comparison of an output with it, and the map of where a failing
output is wrong.

``cudaopt_compare`` yields the statistics of :func:`harness_tools.check.compare.compare`; ``cudaopt_mismatch_map``
bins its mismatches and NaN/Inf as :mod:`harness_tools.check.mismatch_map` does (DeviceCheck.bins), launched only
for an output that failed: a histogram per block in shared memory, added to the ``rows × cols`` counts once per
block, so a wholly wrong output does not serialise on a thousand global counters.
"""

from __future__ import annotations

MAP_BINS = 1024  # the most bins a map has: 32 × 32 (harness_tools.check.mismatch_map), or 1 × 256

# The verdict per element is the host's (compare.py): |got - ref| <= atol + rtol·|ref| in float64, NaN/Inf where
# the reference is finite always failing, and a non-finite reference matched exactly. Every product and sum is
# rounded as written (__dmul_rn, __dadd_rn: no fused multiply-add), so with an exact (float64) reference the
# device's verdict is bit for bit the host's. With a rounded one, an element within `margin` of its threshold
# may go either way: it counts in `possible` if it passed, and not in `certain` if it failed.
SOURCE = f"#define MAP_BINS {MAP_BINS}\n" + r"""
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

// The host's predicate: outside tolerance. For a finite reference, err = |g - r| and thr = atol + rtol·|r|.
__device__ __forceinline__ bool outside(double g, double r, double atol, double rtol, double& err, double& thr)
{
    if (!isfinite(r)) return !((isnan(r) && isnan(g)) || r == g);  // a non-finite reference is matched exactly
    err = fabs(__dadd_rn(g, -r));
    thr = __dadd_rn(__dmul_rn(fabs(r), rtol), atol);
    return !(err <= thr);  // NaN compares false: NaN is bad
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
        double err = 0.0, thr = 0.0;
        const bool bad = outside(g, r, atol, rtol, err, thr);
        bool sure, maybe;
        if (!rf) {
            sure = maybe = bad;
        } else {
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

// Per-bin counts of mismatches, then of NaN/Inf where the reference is finite, added into bins[2 · rows · cols]:
// element i is (i / view_cols, i % view_cols) of the view, in bin (row · rows / view_rows, col · cols / view_cols).
extern "C" __global__ void cudaopt_mismatch_map(const unsigned char* __restrict__ got, const unsigned int* __restrict__ hi,
                                                const unsigned short* __restrict__ lo, int code, int hi_double, size_t n,
                                                double atol, double rtol, Key key, size_t view_rows, size_t view_cols,
                                                int rows, int cols, unsigned long long* bins)
{
    __shared__ unsigned int counts[2 * MAP_BINS];
    const int cells = rows * cols;
    for (int b = threadIdx.x; b < 2 * cells; b += blockDim.x) counts[b] = 0;
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double g = element(got, i, code);
        const double r = reference(hi, lo, hi_double, i, key);
        double err, thr;
        const bool bad = outside(g, r, atol, rtol, err, thr);
        const bool nonfinite = isfinite(r) && !isfinite(g);
        if (!bad && !nonfinite) continue;
        const size_t row = i / view_cols, col = i - row * view_cols;
        const int bin = (int)(row * rows / view_rows) * cols + (int)(col * cols / view_cols);
        if (bad) atomicAdd(&counts[bin], 1u);
        if (nonfinite) atomicAdd(&counts[cells + bin], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 2 * cells; b += blockDim.x)
        if (counts[b]) atomicAdd(&bins[b], (unsigned long long)counts[b]);
}
"""

KERNELS = ["cudaopt_compare", "cudaopt_mask", "cudaopt_peek", "cudaopt_mismatch_map"]
CODES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "float8_e4m3": 4, "float8_e5m2": 5, "int8": 6,
         "int16": 7, "int32": 8, "int64": 9, "uint8": 10, "uint16": 11, "uint32": 12, "uint64": 13}
STATS = 10  # unsigned 64-bit words of the Stats struct: 9 results, then the peeked reference value
NO_INDEX = (1 << 64) - 1
