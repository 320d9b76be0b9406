// Layer norm with one statistics pass: one block of THREADS threads per row (one batch element).
//
// Pass 1 accumulates, per thread in fp32, the sums of d and d^2 for d = x - x[row, 0] (shifting by an element
// of the row keeps the variance E[d^2] - E[d]^2 from cancelling the way E[x^2] - E[x]^2 would), ITEMS vector
// loads in flight per thread (float4 when cols is a multiple of 4, so every row starts 16-byte aligned;
// single floats otherwise); the block adds them with warp shuffles and one shared-memory step. Pass 2 writes
// y = (x - mean) * rstd * weight + bias with the same vector width.
//
// Tunables (#defines): THREADS per block (a multiple of 32), ITEMS vector loads per thread in flight.
// Launch: grid [rows], block [THREADS].
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif

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

__device__ __forceinline__ float2 block_sum2(float a, float b)
{
    __shared__ float2 warp_sums[THREADS / 32];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, offset);
        b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = make_float2(a, b);
    __syncthreads();
    float2 total = warp_sums[0];
    for (int i = 1; i < THREADS / 32; ++i) {  // every thread, same order: the same result everywhere
        total.x += warp_sums[i].x;
        total.y += warp_sums[i].y;
    }
    return total;
}

template <int W>
__device__ __forceinline__ void row_layer_norm(const float* xr, const float* weight, const float* bias, float* yr,
                                               int cols, float eps)
{
    const int nw = cols / W;  // W divides cols
    constexpr int STEP = THREADS * ITEMS;
    const float shift = __ldg(xr);
    float s1 = 0.0f, s2 = 0.0f;
    for (int base = 0; base < nw; base += STEP) {
        float v[ITEMS][W];
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int w = base + it * THREADS + threadIdx.x;
            if (w < nw) {
                Lanes<W>::load(xr + (size_t)w * W, v[it]);
            } else {
#pragma unroll
                for (int c = 0; c < W; ++c) v[it][c] = shift;  // contributes d = 0
            }
        }
#pragma unroll
        for (int it = 0; it < ITEMS; ++it)
#pragma unroll
            for (int c = 0; c < W; ++c) {
                const float d = v[it][c] - shift;
                s1 += d;
                s2 = fmaf(d, d, s2);
            }
    }
    const float2 total = block_sum2(s1, s2);
    const float md = total.x / cols;
    const float var = fmaxf(total.y / cols - md * md, 0.0f);
    const float mean = shift + md;
    const float rstd = rsqrtf(var + eps);

    for (int base = 0; base < nw; base += STEP) {
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {
            const int w = base + it * THREADS + threadIdx.x;
            if (w < nw) {
                float v[W], g[W], h[W];
                Lanes<W>::load(xr + (size_t)w * W, v);
                Lanes<W>::load(weight + (size_t)w * W, g);
                Lanes<W>::load(bias + (size_t)w * W, h);
#pragma unroll
                for (int c = 0; c < W; ++c) v[c] = fmaf((v[c] - mean) * rstd, g[c], h[c]);
                Lanes<W>::store(yr + (size_t)w * W, v);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
layer_norm(const float* x, const float* weight, const float* bias, float* y, int rows, int cols, float eps)
{
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    if (cols % 4 == 0) row_layer_norm<4>(xr, weight, bias, yr, cols, eps);
    else row_layer_norm<1>(xr, weight, bias, yr, cols, eps);
}
