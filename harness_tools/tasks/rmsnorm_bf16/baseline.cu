// Baseline RMSNorm over bf16 rows: one block per row, fp32 accumulation. Each thread sums the squares of a
// strided slice, a shared-memory tree combines them, then the row is scaled and rounded once to bf16.
#include <cuda_bf16.h>

#define THREADS 256

extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                        int rows, int cols)
{
    __shared__ float partial[THREADS];
    const int r = blockIdx.x;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    __nv_bfloat16* yr = y + (size_t)r * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = __bfloat162float(xr[c]);
        s += v * v;
    }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    const float scale = rsqrtf(partial[0] / cols + 1e-6f);
    for (int c = threadIdx.x; c < cols; c += THREADS)
        yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * scale * __bfloat162float(w[c]));
}
