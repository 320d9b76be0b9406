// C = A^T B with shared-memory tiles and register tiles.
//
// A is K x M and B is K x N, both row-major: a BK-deep slice of A's columns m0..m0+BM is BK rows of BM
// consecutive floats, already the layout the inner product wants (As[k][m]), so neither operand is transposed
// on its way into shared memory. Each block computes a BM x BN tile of C; its (BM/TM)·(BN/TN) threads each
// hold a TM x TN tile of accumulators in registers. Per BK slice: the block copies As[BK][BM] and Bs[BK][BN]
// to shared memory (float4 loads when M and N are multiples of 4, so that every row of A and B starts
// 16-byte aligned; scalar loads otherwise; out-of-range elements are zero), then every thread does BK rank-1
// updates of its register tile. Products are accumulated in fp32, one k at a time.
//
// Tunables (#defines): BM, BN (block tile), BK (slice depth), TM, TN (thread tile).
// Launch: grid [ceil_div(N, BN), ceil_div(M, BM)], block [(BM / TM) * (BN / TN)].
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

#define THREADS ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(THREADS)
matmul_transposed_a(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool vec = (M % 4 == 0) && (N % 4 == 0);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        if (vec) {
            for (int f = tid; f < BK * BM / 4; f += THREADS) {
                const int kk = f / (BM / 4), mm = 4 * (f % (BM / 4));
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (k0 + kk < K && m0 + mm < M)
                    v = *reinterpret_cast<const float4*>(A + (size_t)(k0 + kk) * M + m0 + mm);
                *reinterpret_cast<float4*>(&As[kk][mm]) = v;
            }
            for (int f = tid; f < BK * BN / 4; f += THREADS) {
                const int kk = f / (BN / 4), nn = 4 * (f % (BN / 4));
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (k0 + kk < K && n0 + nn < N)
                    v = *reinterpret_cast<const float4*>(B + (size_t)(k0 + kk) * N + n0 + nn);
                *reinterpret_cast<float4*>(&Bs[kk][nn]) = v;
            }
        } else {
            for (int f = tid; f < BK * BM; f += THREADS) {
                const int kk = f / BM, mm = f % BM;
                As[kk][mm] = (k0 + kk < K && m0 + mm < M) ? A[(size_t)(k0 + kk) * M + m0 + mm] : 0.0f;
            }
            for (int f = tid; f < BK * BN; f += THREADS) {
                const int kk = f / BN, nn = f % BN;
                Bs[kk][nn] = (k0 + kk < K && n0 + nn < N) ? B[(size_t)(k0 + kk) * N + n0 + nn] : 0.0f;
            }
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ty * TM + i;
        if (m >= M) break;
        float* row = C + (size_t)m * N + n0 + tx * TN;
        if (vec && TN % 4 == 0 && n0 + tx * TN + TN <= N) {
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(row + j) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        } else {
#pragma unroll
            for (int j = 0; j < TN; ++j)
                if (n0 + tx * TN + j < N) row[j] = acc[i][j];
        }
    }
}
