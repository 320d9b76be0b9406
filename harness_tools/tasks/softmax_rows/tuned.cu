// Row softmax, one block per row. Pass 1 keeps a running (max, sum of exp(x - max)) per thread, so the
// row is read once for both; the pairs are merged by warp shuffles and then across warps through shared
// memory. Pass 2 reads the row again (now in L1/L2) and writes exp(x - max) / sum. Loads are coalesced:
// thread t takes columns t, t + BLOCK, ...
//
// Tunables (#defines): BLOCK threads per row (a multiple of 32); UNROLL columns per thread per loop
// step, loaded together so that several loads are in flight.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#define NEG_INF (-__int_as_float(0x7f800000))

// Merge (m2, s2) into (m, s); both are (max, sum of exp(x - max)) over disjoint sets of columns.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2)
{
    const float mm = fmaxf(m, m2);
    if (mm == NEG_INF) return;  // both sets empty
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

__device__ __forceinline__ void warp_merge(float& m, float& s)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        merge(m, s, m2, s2);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) softmax_rows(const float* x, float* y, int rows, int cols)
{
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    float m = NEG_INF, s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK * UNROLL) {
        float v[UNROLL];
        float vmax = NEG_INF;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = c + u * BLOCK < cols ? __ldg(xr + c + u * BLOCK) : NEG_INF;
            vmax = fmaxf(vmax, v[u]);
        }
        if (vmax > m) {  // rescale the running sum to the new maximum
            s *= expf(m - vmax);
            m = vmax;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) s += expf(v[u] - m);  // exp(-inf) adds 0 for padding
    }

    // Every warp merges its lanes, then every warp merges the per-warp results: all threads end with the
    // row's (max, sum) and no second barrier is needed.
    __shared__ float wm[BLOCK / 32], ws[BLOCK / 32];
    warp_merge(m, s);
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
        wm[threadIdx.x / 32] = m;
        ws[threadIdx.x / 32] = s;
    }
    __syncthreads();
    m = lane < BLOCK / 32 ? wm[lane] : NEG_INF;
    s = lane < BLOCK / 32 ? ws[lane] : 0.0f;
    warp_merge(m, s);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = expf(__ldg(xr + c) - m) * inv;
}
