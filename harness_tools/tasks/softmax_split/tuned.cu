// Tunable split softmax (same two passes as the baseline, launched as one sequence):
// - THREADS threads per block, CHUNK columns per block (grid: ceil_div(cols, CHUNK) x rows);
// - pass 1 reads its chunk once, keeping an online (max, sum) per thread: s = s * exp(m - m') + exp(x - m');
// - VEC = 4 reads and writes float4s where cols is a multiple of 4 (rows then start 16-byte aligned; CHUNK is
//   a multiple of 4), scalar otherwise;
// - reductions: __shfl_xor_sync within warps, then one value per warp through shared memory.
#define LOWEST (-3.402823466e38f)
#define WARPS (THREADS / 32)

struct Stat { float m, s; };

__device__ __forceinline__ Stat merge(Stat a, Stat b)
{
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void add(Stat& t, float v)
{
    if (v > t.m) {
        t.s = t.s * expf(t.m - v) + 1.0f;
        t.m = v;
    } else {
        t.s += expf(v - t.m);
    }
}

__device__ Stat block_merge(Stat t, Stat* shared)
{
    for (int o = 16; o > 0; o >>= 1) {
        Stat u = {__shfl_xor_sync(0xffffffffu, t.m, o), __shfl_xor_sync(0xffffffffu, t.s, o)};
        t = merge(t, u);
    }
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = t;
    __syncthreads();
    Stat r = shared[0];
    for (int w = 1; w < WARPS; ++w) r = merge(r, shared[w]);
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_chunk_stats(const float* x, float* stats, int rows, int cols)
{
    __shared__ Stat shared[WARPS];
    const int r = blockIdx.y;
    const int c0 = blockIdx.x * CHUNK, c1 = min(c0 + CHUNK, cols);
    const float* xr = x + (size_t)r * cols;
    Stat t = {LOWEST, 0.0f};
    if (VEC == 4 && (cols & 3) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int q = c0 / 4 + threadIdx.x; q < c1 / 4; q += THREADS) {
            const float4 v = x4[q];
            add(t, v.x); add(t, v.y); add(t, v.z); add(t, v.w);
        }
    } else {
        for (int c = c0 + threadIdx.x; c < c1; c += THREADS) add(t, xr[c]);
    }
    t = block_merge(t, shared);
    if (threadIdx.x == 0) {
        float* st = stats + 2 * ((size_t)r * gridDim.x + blockIdx.x);
        st[0] = t.m;
        st[1] = t.s;
    }
}

extern "C" __global__ void softmax_chunk_write(const float* x, const float* stats, float* y, int rows, int cols)
{
    __shared__ Stat shared[WARPS];
    const int r = blockIdx.y, chunks = gridDim.x;
    const float* st = stats + 2 * (size_t)r * chunks;
    Stat t = {LOWEST, 0.0f};
    for (int k = threadIdx.x; k < chunks; k += THREADS) t = merge(t, Stat{st[2 * k], st[2 * k + 1]});
    t = block_merge(t, shared);
    const float big = t.m, inv = 1.0f / t.s;
    const int c0 = blockIdx.x * CHUNK, c1 = min(c0 + CHUNK, cols);
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    if (VEC == 4 && (cols & 3) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int q = c0 / 4 + threadIdx.x; q < c1 / 4; q += THREADS) {
            const float4 v = x4[q];
            y4[q] = make_float4(expf(v.x - big) * inv, expf(v.y - big) * inv, expf(v.z - big) * inv,
                                expf(v.w - big) * inv);
        }
    } else {
        for (int c = c0 + threadIdx.x; c < c1; c += THREADS) yr[c] = expf(xr[c] - big) * inv;
    }
}
