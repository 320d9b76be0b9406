// Tunable RMSNorm over bf16 rows: one block of THREADS threads per row, fp32 accumulation, a warp-shuffle
// reduction then one shared-memory step. VEC bf16 values per load (2: __nv_bfloat162, 8: one 16-byte uint4)
// when cols is a multiple of VEC (rows then start 16-byte aligned for VEC 8); scalar loads otherwise.
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 8
#endif

struct alignas(16) Bf16x8 { __nv_bfloat162 p[4]; };

__device__ __forceinline__ float block_sum(float s)
{
    __shared__ float warp_sums[THREADS / 32];
    __shared__ float total;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (threadIdx.x == 0) total = v;
    }
    __syncthreads();
    return total;
}

extern "C" __global__ void __launch_bounds__(THREADS) rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                                   __nv_bfloat16* y, int rows, int cols)
{
    const size_t base = (size_t)blockIdx.x * cols;
    const bool vec = VEC > 1 && cols % VEC == 0;
    float s = 0.0f;
    if (vec && VEC == 8) {
        const Bf16x8* xr = reinterpret_cast<const Bf16x8*>(x + base);
        for (int c = threadIdx.x; c < cols / 8; c += THREADS) {
            const Bf16x8 v = xr[c];
            for (int k = 0; k < 4; ++k) {
                const float2 f = __bfloat1622float2(v.p[k]);
                s += f.x * f.x + f.y * f.y;
            }
        }
    } else if (vec) {
        const __nv_bfloat162* xr = reinterpret_cast<const __nv_bfloat162*>(x + base);
        for (int c = threadIdx.x; c < cols / 2; c += THREADS) {
            const float2 f = __bfloat1622float2(xr[c]);
            s += f.x * f.x + f.y * f.y;
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += THREADS) {
            const float v = __bfloat162float(x[base + c]);
            s += v * v;
        }
    }
    const float scale = rsqrtf(block_sum(s) / cols + 1e-6f);
    if (vec && VEC == 8) {
        const Bf16x8* xr = reinterpret_cast<const Bf16x8*>(x + base);
        const Bf16x8* wr = reinterpret_cast<const Bf16x8*>(w);
        Bf16x8* yr = reinterpret_cast<Bf16x8*>(y + base);
        for (int c = threadIdx.x; c < cols / 8; c += THREADS) {
            const Bf16x8 v = xr[c], g = wr[c];
            Bf16x8 out;
            for (int k = 0; k < 4; ++k) {
                const float2 f = __bfloat1622float2(v.p[k]), h = __bfloat1622float2(g.p[k]);
                out.p[k] = __floats2bfloat162_rn(f.x * scale * h.x, f.y * scale * h.y);
            }
            yr[c] = out;
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += THREADS)
            y[base + c] = __float2bfloat16(__bfloat162float(x[base + c]) * scale * __bfloat162float(w[c]));
    }
}
