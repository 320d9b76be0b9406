// Tiled SGEMM: C[M,N] = A[M,K] * B[K,N], all row-major fp32, any M, N, K (no alignment assumed).
//
// Each block computes a BM x BN tile of C, stepping through K in slices of BK. A slice of A (BM x BK)
// and of B (BK x BN) is staged in shared memory; each thread then accumulates a TM x TN sub-tile in
// registers (outer products: TM + TN shared reads feed TM * TN FMAs). While one slice is consumed, the
// next one is already being fetched from global memory into registers, which hides its latency.
//
// Tunables (#defines): BM, BN, BK, TM, TN. Threads per block: (BM / TM) * (BN / TN).
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif

#define TX (BN / TN)       // threads along N
#define TY (BM / TM)       // threads along M
#define NT (TX * TY)       // threads per block
#define A_LOADS (BM * BK / NT)
#define B_LOADS (BK * BN / NT)
// Fragment reads from shared memory are float4 (or float2) wide where TM / TN allow.
#define VM (TM % 4 == 0 ? 4 : (TM % 2 == 0 ? 2 : 1))
#define VN (TN % 4 == 0 ? 4 : (TN % 2 == 0 ? 2 : 1))
// A is stored transposed (As[k][m]); a pad of 4 keeps float4 alignment and spreads the transposing
// stores, where consecutive threads write consecutive k, over different banks.
#define APAD 4

template <int V>
__device__ __forceinline__ void load_frag(float* dst, const float* src)
{
    if constexpr (V == 4) {
        const float4 t = *reinterpret_cast<const float4*>(src);
        dst[0] = t.x; dst[1] = t.y; dst[2] = t.z; dst[3] = t.w;
    } else if constexpr (V == 2) {
        const float2 t = *reinterpret_cast<const float2*>(src);
        dst[0] = t.x; dst[1] = t.y;
    } else {
        dst[0] = src[0];
    }
}

// (NT, 1): the block size lets ptxas use up to 65536 / NT registers (it spilled more with NT alone).
extern "C" __global__ void __launch_bounds__(NT, 1) sgemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ __align__(16) float As[BK][BM + APAD];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    // A thread's outputs are interleaved in groups of VM rows / VN columns, so that neighbouring threads
    // read neighbouring 16-byte words of shared memory (no bank conflicts) and write neighbouring columns.
    auto out_row = [&](int i) { return (i / VM) * (TY * VM) + ty * VM + i % VM; };
    auto out_col = [&](int j) { return (j / VN) * (TX * VN) + tx * VN + j % VN; };

    // Global -> registers. Element e = tid + i * NT of a slice: consecutive threads take consecutive k of
    // a row of A and consecutive n of a row of B, so loads are coalesced. BK divides NT, and NT and BN
    // divide one another (task constraints), so a thread's coordinates are its own part plus a
    // compile-time part per load;
    // only a few row pointers and "how much is left" counters stay live across the K loop.
    // Out-of-range elements read as 0 and add nothing. In-tile offsets are ints: BM*K, BK*N < 2^31.
    const float* a_ptr = A + (size_t)(row0 + tid / BK) * K + tid % BK;
    const float* b_ptr = B + (size_t)(tid / BN) * N + col0 + tid % BN;
    const int a_rows_left = M - row0 - tid / BK, a_k = tid % BK;
    const int b_cols_left = N - col0 - tid % BN, b_k = tid / BN;
    float a_stage[A_LOADS], b_stage[B_LOADS];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int dr = i * NT / BK;
            a_stage[i] = (dr < a_rows_left && a_k + k0 < K) ? __ldg(a_ptr + dr * K + k0) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int dk = i * NT / BN, dc = i * NT % BN;
            b_stage[i] = (dc < b_cols_left && b_k + dk + k0 < K) ? __ldg(b_ptr + (size_t)k0 * N + dk * N + dc) : 0.0f;
        }
    };

    float acc[TM][TN] = {};
    fetch(0);
    for (int k0 = 0; k0 < K; k0 += BK) {
        __syncthreads();  // everyone is done reading the previous slice
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            const int e = tid + i * NT;
            As[e % BK][e / BK] = a_stage[i];
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            const int e = tid + i * NT;
            Bs[e / BN][e % BN] = b_stage[i];
        }
        __syncthreads();
        if (k0 + BK < K) fetch(k0 + BK);  // in flight while the FMAs below run

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += VM) load_frag<VM>(a + i, &As[kk][out_row(i)]);
#pragma unroll
            for (int j = 0; j < TN; j += VN) load_frag<VN>(b + j, &Bs[kk][out_col(j)]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + out_row(i);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + out_col(j);
            if (c < N) C[(size_t)r * N + c] = acc[i][j];
        }
    }
}
