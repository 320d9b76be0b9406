// Tiled SGEMM: C[M,N] = A[M,K] * B[K,N], all row-major fp32, any M, N, K (no alignment assumed).
//
// Each block computes a BM x BN tile of C, stepping through K in slices of BK. Slices of A (BM x BK,
// stored transposed) and B (BK x BN) are staged in two shared-memory buffers: while the block's FMAs
// consume one, the next slice is fetched from global memory into registers and then stored into the
// other, so one barrier per slice suffices. Each thread accumulates a TM x TN sub-tile in registers
// (outer products: TM + TN shared reads feed TM * TN FMAs). When K and N are multiples of 4 (rows then
// start 16-byte aligned) global loads are float4 wide; otherwise a scalar path does the same work.
//
// Tunables (#defines): BM, BN, BK, TM, TN; MINB = blocks per SM the compiler must fit (it caps registers
// per thread at 65536 / (MINB * threads), trading spills against occupancy); WIDE_MIN: -1 for one tile shape;
// otherwise a second, wide shape BM x 2*BN with TM x 2*TN per thread (same threads, twice the work per
// thread: fewer shared-memory reads per FMA) is used whenever it still gives at least WIDE_MIN blocks, so
// large products take the wide tiles and narrow ones keep enough blocks to fill the GPU. The launch's grid
// and shared memory repeat that choice (see task.json).
// Threads per block: (BM / TM) * (BN / TN).
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
#ifndef MINB
#define MINB 2
#endif
#ifndef WIDE_MIN
#define WIDE_MIN -1
#endif

// A is stored transposed (As[k][m]); a pad of 4 keeps float4 alignment and spreads the transposing
// stores over more banks.
#define APAD 4

// One tile shape: bm x bn per block, tm x tn per thread.
template <int BM_, int BN_, int TM_, int TN_>
struct Tile {
    static constexpr int bm = BM_, bn = BN_, tm = TM_, tn = TN_;
    static constexpr int tx = bn / tn, ty = bm / tm, nt = tx * ty;  // threads along N, along M, per block
    // Fragment reads from shared memory are float4 (or float2) wide where tm / tn allow.
    static constexpr int vm = tm % 4 == 0 ? 4 : (tm % 2 == 0 ? 2 : 1);
    static constexpr int vn = tn % 4 == 0 ? 4 : (tn % 2 == 0 ? 2 : 1);
};
using Narrow = Tile<BM, BN, TM, TN>;
using Wide = Tile<BM, 2 * BN, TM, 2 * TN>;
static_assert(Wide::nt == Narrow::nt, "both tile shapes use the same threads");

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

// Moves BK-deep slices of A and B from global memory to shared memory with W-wide (4 or 1) loads.
// Element group e = tid + i * NT of a slice: consecutive threads take consecutive k of a row of A and
// consecutive n of a row of B, so loads are coalesced. Groups past the slice's size (when a slice has
// fewer groups than the block has threads) are skipped at compile time. Out-of-range elements read as
// 0 and add nothing; with W = 4, K and N are multiples of 4, so a group is either wholly in range or not.
template <class T, int W>
struct SliceLoader {
    static constexpr int NT = T::nt;
    static constexpr int A_GROUPS = T::bm * BK / W, B_GROUPS = BK * T::bn / W;
    static constexpr int A_LOADS = (A_GROUPS + NT - 1) / NT, B_LOADS = (B_GROUPS + NT - 1) / NT;
    static constexpr int AKG = BK / W, BNG = T::bn / W;  // groups per row of the A slice / of the B slice
    float a[A_LOADS][W], b[B_LOADS][W];
    const float* a_ptr;
    const float* b_ptr;
    int a_rows_left, a_k, b_cols_left, b_k, K, N;

    __device__ __forceinline__ SliceLoader(const float* A, const float* B, int M_, int N_, int K_, int row0, int col0)
    {
        const int tid = threadIdx.x;
        K = K_; N = N_;
        // With NT a multiple of AKG (and of BNG, or BNG a multiple of NT), a thread's column within a
        // slice is the same for all its loads; only the row moves by a compile-time step.
        a_k = (tid % AKG) * W;
        a_rows_left = M_ - row0 - tid / AKG;
        a_ptr = A + (size_t)(row0 + tid / AKG) * K_ + a_k;
        b_k = tid / BNG;
        b_cols_left = N_ - col0 - (tid % BNG) * W;
        b_ptr = B + (size_t)b_k * N_ + col0 + (tid % BNG) * W;
    }

    template <int V>
    __device__ __forceinline__ static void load(float* dst, const float* src, bool ok)
    {
        if constexpr (V == 4) {
            const float4 t = ok ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
            dst[0] = t.x; dst[1] = t.y; dst[2] = t.z; dst[3] = t.w;
        } else {
            dst[0] = ok ? __ldg(src) : 0.0f;
        }
    }

    __device__ __forceinline__ void fetch(int k0)
    {
        const int tid = threadIdx.x;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            if (A_GROUPS % NT != 0 && tid + i * NT >= A_GROUPS) break;
            const int dr = i * NT / AKG;
            load<W>(a[i], a_ptr + (size_t)dr * K + k0, dr < a_rows_left && a_k + k0 < K);
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            if (B_GROUPS % NT != 0 && tid + i * NT >= B_GROUPS) break;
            const int dk = i * NT / BNG, dc = (i * NT % BNG) * W;
            load<W>(b[i], b_ptr + (size_t)(k0 + dk) * N + dc, dc < b_cols_left && b_k + dk + k0 < K);
        }
    }

    __device__ __forceinline__ void store(float (*As)[T::bm + APAD], float (*Bs)[T::bn]) const
    {
        const int tid = threadIdx.x;
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) {
            if (A_GROUPS % NT != 0 && tid + i * NT >= A_GROUPS) break;
            const int g = tid + i * NT, m = g / AKG, k = (g % AKG) * W;
#pragma unroll
            for (int w = 0; w < W; ++w) As[k + w][m] = a[i][w];
        }
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) {
            if (B_GROUPS % NT != 0 && tid + i * NT >= B_GROUPS) break;
            const int g = tid + i * NT, k = g / BNG, n = (g % BNG) * W;
            if constexpr (W == 4)
                *reinterpret_cast<float4*>(&Bs[k][n]) = make_float4(b[i][0], b[i][1], b[i][2], b[i][3]);
            else
                Bs[k][n] = b[i][0];
        }
    }
};

template <class T, int W>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                          int M, int N, int K, float* smem)
{
    constexpr int TM_ = T::tm, TN_ = T::tn, VM = T::vm, VN = T::vn;
    auto As = reinterpret_cast<float (*)[BK][T::bm + APAD]>(smem);                  // [2][BK][bm + APAD]
    auto Bs = reinterpret_cast<float (*)[BK][T::bn]>(smem + 2 * BK * (T::bm + APAD));  // [2][BK][bn]
    const int tid = threadIdx.x;
    const int tx = tid % T::tx, ty = tid / T::tx;
    const int row0 = blockIdx.y * T::bm, col0 = blockIdx.x * T::bn;
    // A thread's outputs are interleaved in groups of VM rows / VN columns, so that neighbouring threads
    // read neighbouring 16-byte words of shared memory (no bank conflicts) and write neighbouring columns.
    auto out_row = [&](int i) { return (i / VM) * (T::ty * VM) + ty * VM + i % VM; };
    auto out_col = [&](int j) { return (j / VN) * (T::tx * VN) + tx * VN + j % VN; };

    SliceLoader<T, W> loader(A, B, M, N, K, row0, col0);
    float acc[TM_][TN_] = {};
    loader.fetch(0);
    loader.store(As[0], Bs[0]);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) loader.fetch(k0 + BK);  // in flight while the FMAs below run
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM_], b[TN_];
#pragma unroll
            for (int i = 0; i < TM_; i += VM) load_frag<VM>(a + i, &As[buf][kk][out_row(i)]);
#pragma unroll
            for (int j = 0; j < TN_; j += VN) load_frag<VN>(b + j, &Bs[buf][kk][out_col(j)]);
#pragma unroll
            for (int i = 0; i < TM_; ++i)
#pragma unroll
                for (int j = 0; j < TN_; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        // The other buffer was last read before the previous barrier, so it may be overwritten now.
        if (more) loader.store(As[buf ^ 1], Bs[buf ^ 1]);
        __syncthreads();
        buf ^= 1;
    }

#pragma unroll
    for (int i = 0; i < TM_; ++i) {
        const int r = row0 + out_row(i);
        if (r >= M) continue;
        float* c_row = C + (size_t)r * N;
#pragma unroll
        for (int j = 0; j < TN_; j += VN) {
            const int c = col0 + out_col(j);
            if constexpr (W == 4 && VN == 4) {  // N % 4 == 0: a group of 4 columns is in range or not at all
                if (c < N) *reinterpret_cast<float4*>(c_row + c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
#pragma unroll
                for (int v = 0; v < VN; ++v)
                    if (c + v < N) c_row[c + v] = acc[i][j + v];
            }
        }
    }
}

template <class T>
__device__ __forceinline__ void gemm(const float* A, const float* B, float* C, int M, int N, int K, float* smem)
{
    const bool aligned = ((K | N) & 3) == 0 && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B) |
                                                 reinterpret_cast<size_t>(C)) & 15) == 0;
    if (aligned)
        gemm_tile<T, 4>(A, B, C, M, N, K, smem);
    else
        gemm_tile<T, 1>(A, B, C, M, N, K, smem);
}

// Wide tiles while they still make at least WIDE blocks (the launch's grid makes the same choice). A
// template, so that with WIDE < 0 the wide code is never instantiated.
template <int WIDE>
__device__ __forceinline__ void dispatch(const float* A, const float* B, float* C, int M, int N, int K, float* smem)
{
    if constexpr (WIDE >= 0) {
        const long long wide_blocks = (long long)((M + BM - 1) / BM) * ((N + 2 * BN - 1) / (2 * BN));
        if (wide_blocks >= WIDE) {
            gemm<Wide>(A, B, C, M, N, K, smem);
            return;
        }
    }
    gemm<Narrow>(A, B, C, M, N, K, smem);
}

// Shared memory is dynamic (launch: 8 * BK * (BM + 4 + BN) bytes, BN doubled for wide tiles), so deep slices
// may use more than 48 KB.
extern "C" __global__ void __launch_bounds__(Narrow::nt, MINB) sgemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    extern __shared__ __align__(16) float smem[];
    dispatch<WIDE_MIN>(A, B, C, M, N, K, smem);
}
