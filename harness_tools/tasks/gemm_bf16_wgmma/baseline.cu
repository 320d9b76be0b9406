// Baseline bf16 GEMM on the CUDA cores: C[M,N] = A[M,K] * B[K,N], all row-major bf16, fp32 accumulation, any
// M, N, K. Each block of 256 threads computes a 64 x 64 tile of C, each thread a 4 x 4 sub-tile (rows ty + 16 i,
// columns tx + 16 j: neighbouring threads touch neighbouring columns). 16-deep slices of A (transposed) and B
// are converted to fp32 once, into shared memory; out-of-range elements read as 0. No tensor cores, no
// vector loads, one buffer: simple, and it runs on the cpu backend too.
#include <cuda_bf16.h>

#define TILE 64
#define SLICE 16

extern "C" __global__ void __launch_bounds__(256) gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                            __nv_bfloat16* C, int M, int N, int K)
{
    __shared__ float As[SLICE][TILE + 1];  // As[k][m]; the pad spreads the transposing stores over the banks
    __shared__ float Bs[SLICE][TILE];      // Bs[k][n]
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += SLICE) {
        for (int i = 0; i < 4; ++i) {
            const int e = tid + i * 256;
            const int m = e / SLICE, k = e % SLICE;  // A: consecutive threads read consecutive k of one row
            const int r = row0 + m, c = k0 + k;
            As[k][m] = r < M && c < K ? __bfloat162float(A[(size_t)r * K + c]) : 0.0f;
            const int kb = e / TILE, n = e % TILE;   // B: consecutive threads read consecutive n of one row
            const int rb = k0 + kb, cb = col0 + n;
            Bs[kb][n] = rb < K && cb < N ? __bfloat162float(B[(size_t)rb * N + cb]) : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < SLICE; ++k) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty + 16 * i;
        if (r >= M) continue;
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (c < N) C[(size_t)r * N + c] = __float2bfloat16(acc[i][j]);
        }
    }
}
