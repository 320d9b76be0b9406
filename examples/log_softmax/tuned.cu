// Row log-softmax in two passes over the row: one block per row, THREADS threads.
//
// Pass 1 keeps a running (max m, sum s of exp(x - m)) per thread: each thread loads ITEMS vectors at once
// (float4 when cols is a multiple of 4, so every row starts 16-byte aligned; single floats otherwise), takes
// their maximum, rescales s once if the maximum grew, then adds their exponentials. The block merges the pairs
// ((m1, s1), (m2, s2) -> (M, s1·e^(m1-M) + s2·e^(m2-M)), M = max(m1, m2)) with warp shuffles and one
// shared-memory step. Pass 2 writes y = (x - m) - log(s): x - m is exact for inputs within a factor of two of
// the maximum, and folding m + log(s) first would add a rounding at the size of m.
//
// Tunables (#defines): THREADS per block (a multiple of 32); ITEMS vector loads per thread in flight;
// BACKWARD 1 walks pass 2 from the row's end, whose lines pass 1 read last and L2 is likeliest still to hold.
// Launch: grid [rows], block [THREADS].
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef BACKWARD
#define BACKWARD 0
#endif

#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no <math.h> INFINITY)

template <int W> struct Lanes;
template <> struct Lanes<1> {
    static __device__ __forceinline__ void load(const float* p, float (&v)[1]) { v[0] = __ldg(p); }
    static __device__ __forceinline__ void store(float* p, const float (&v)[1]) { *p = v[0]; }
};
template <> struct Lanes<4> {
    static __device__ __forceinline__ void load(const float* p, float (&v)[4])
    {
        const float4 t = __ldg(reinterpret_cast<const float4*>(p));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    }
    static __device__ __forceinline__ void store(float* p, const float (&v)[4])
    {
        *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    }
};

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2)
{
    const float top = fmaxf(m, m2);
    if (top == NEG_INF) return;  // both empty
    s = s * __expf(m - top) + s2 * __expf(m2 - top);
    m = top;
}

template <int W>
__device__ __forceinline__ void row_log_softmax(const float* xr, float* yr, int cols)
{
    const int nw = cols / W;  // W divides cols
    constexpr int STEP = THREADS * ITEMS;
    float m = NEG_INF, s = 0.0f;
    for (int base = 0; base < nw; base += STEP) {
        float v[ITEMS][W];
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int w = base + it * THREADS + threadIdx.x;
            if (w < nw) {
                Lanes<W>::load(xr + (size_t)w * W, v[it]);
            } else {
#pragma unroll
                for (int c = 0; c < W; ++c) v[it][c] = NEG_INF;
            }
        }
        float top = NEG_INF;
#pragma unroll
        for (int it = 0; it < ITEMS; ++it)
#pragma unroll
            for (int c = 0; c < W; ++c) top = fmaxf(top, v[it][c]);
        if (top == NEG_INF) continue;  // nothing of the row in this chunk for this thread
        if (top > m) {
            s *= __expf(m - top);
            m = top;
        }
#pragma unroll
        for (int it = 0; it < ITEMS; ++it)
#pragma unroll
            for (int c = 0; c < W; ++c) s += __expf(v[it][c] - m);
    }

#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
    __shared__ float wm[THREADS / 32], ws[THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        wm[warp] = m;
        ws[warp] = s;
    }
    __syncthreads();
    m = wm[0];
    s = ws[0];
    for (int i = 1; i < THREADS / 32; ++i) merge(m, s, wm[i], ws[i]);  // every thread, same order: same result
    const float log_s = logf(s);

    const int chunks = (nw + STEP - 1) / STEP;
    for (int k = 0; k < chunks; ++k) {
        const int base = (BACKWARD ? chunks - 1 - k : k) * STEP;
        float v[ITEMS][W];
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int w = base + it * THREADS + threadIdx.x;
            if (w < nw) Lanes<W>::load(xr + (size_t)w * W, v[it]);
        }
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int w = base + it * THREADS + threadIdx.x;
            if (w < nw) {
#pragma unroll
                for (int c = 0; c < W; ++c) v[it][c] = (v[it][c] - m) - log_s;
                Lanes<W>::store(yr + (size_t)w * W, v[it]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) log_softmax(const float* x, float* y, int rows, int cols)
{
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    if (cols % 4 == 0) row_log_softmax<4>(xr, yr, cols);
    else row_log_softmax<1>(xr, yr, cols);
}
