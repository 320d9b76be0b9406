// Tunable bf16 GEMM on the tensor cores: C[M,N] = A[M,K] * B[K,N], all row-major bf16, fp32 accumulation.
// Requires N and K to be multiples of 8 (task.json's size_rules: every row then starts 16-byte aligned); any M.
//
// Structure (sm_80+ warp-level MMA, tuned for Hopper's sm_90):
// - Grid: one block per BM x BN tile of C, 1-D, raster-swizzled: GROUP_M consecutive tile rows are walked
//   column by column, so the blocks resident at one time share A rows and B columns in L2.
// - Main loop: BK-deep slices of A (BM x BK) and B (BK x BN) go global -> shared with 16-byte cp.async
//   (L1 bypassed) into a ring of STAGES buffers; STAGES - 1 slices are in flight while one is consumed, one
//   barrier per slice. Chunks outside the matrix (M, N or K edge) are zero-filled by the copy itself
//   (src-size 0), so partial tiles need no other special case.
// - Shared layout: rows of 16-byte chunks, the chunk index XOR-swizzled with the row (A: row & 7 for BK >= 64,
//   (row >> 1) & 3 for BK = 32; B: row & 7), so that both the cp.async stores and the ldmatrix reads of 8
//   rows touch 8 different 16-byte bank groups: no bank conflicts and no padding.
// - Warps: (BM / WM) x (BN / WN), each computing a WM x WN tile with (WM / 16) x (WN / 8)
//   mma.sync.m16n8k16 bf16 -> fp32 per 16-deep step; A fragments by ldmatrix.x4, B fragments by
//   ldmatrix.x4.trans (B is K x N row-major, the transposing load gives the k-major fragment directly).
// - Epilogue: the fp32 accumulators are rounded once to bf16, staged through shared memory (rows padded by
//   16 bytes: conflict-free) and written as full 16-byte, row-contiguous chunks, masked at the M and N edges.
// Tunables (#defines): BM, BN, BK, WM, WN, STAGES, GROUP_M, MINB (blocks per SM for __launch_bounds__).
// Threads per block: 32 * (BM / WM) * (BN / WN). Dynamic shared memory:
// max(STAGES * (BM * BK + BK * BN), BM * (BN + 8)) * 2 bytes.
#include <cuda_bf16.h>
#include <stdint.h>

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef MINB
#define MINB 1
#endif

constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kMT = WM / 16, kNT = WN / 8;             // mma tiles of a warp along M and N
constexpr int kAChunks = BK / 8, kBChunks = BN / 8;    // 16-byte chunks per shared row of A and of B
constexpr int kARowBytes = BK * 2, kBRowBytes = BN * 2;
constexpr int kAStageBytes = BM * kARowBytes, kBStageBytes = BK * kBRowBytes;
constexpr int kStageBytes = kAStageBytes + kBStageBytes;
constexpr int kALoads = BM * kAChunks / kThreads, kBLoads = BK * kBChunks / kThreads;  // chunks per thread
constexpr int kARowStep = kThreads / kAChunks, kBRowStep = kThreads / kBChunks;       // rows between them
constexpr int kCRowBytes = BN * 2 + 16;                 // epilogue staging row (padded)
constexpr int kCChunks = BM * kBChunks / kThreads;

static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiling");
static_assert(BK == 32 || BK == 64 || BK == 128, "BK is 32, 64 or 128 (the A swizzle)");
static_assert(BN % 64 == 0, "B rows of at least 8 chunks (the B swizzle)");
static_assert(kALoads >= 1 && BM * kAChunks % kThreads == 0, "A slice: whole chunks per thread");
static_assert(kBLoads >= 1 && BK * kBChunks % kThreads == 0, "B slice: whole chunks per thread");
static_assert(kThreads % kAChunks == 0 && kThreads % kBChunks == 0, "a thread keeps its chunk column");
static_assert(kCChunks >= 1 && BM * kBChunks % kThreads == 0, "epilogue: whole chunks per thread");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(kARowStep % 8 == 0, "a thread's A rows share one swizzle");

// ---- PTX wrappers: the only inline assembly --------------------------------------------------------------
typedef uint32_t saddr_t;  // a shared-memory address (state space .shared)

__device__ __forceinline__ saddr_t shared_address(const void* p)
{
    return static_cast<saddr_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, L2 only; with valid == false nothing is read and the 16 bytes are zero-filled.
__device__ __forceinline__ void async_copy16(saddr_t dst, const void* src, bool valid)
{
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8; r[j] is matrix j's fragment.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], saddr_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// The same, transposed: lane 4 g + t receives elements (2t, g) and (2t + 1, g) of each matrix.
__device__ __forceinline__ void ldsm_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, saddr_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col), bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// ---- end of PTX wrappers -----------------------------------------------------------------------------------

// Physical 16-byte chunk of logical chunk c in shared row r.
__device__ __forceinline__ int swizzle_a(int r, int c)
{
    if constexpr (kAChunks >= 8)
        return c ^ (r & 7);
    else
        return c ^ ((r >> 1) & 3);
}

__device__ __forceinline__ int swizzle_b(int r, int c) { return c ^ (r & 7); }

extern "C" __global__ void __launch_bounds__(kThreads, MINB) gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                                       __nv_bfloat16* C, int M, int N, int K)
{
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // ---- which tile: GROUP_M tile rows at a time, column by column within the group
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * tiles_n;
    const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
    const int first_m = group * GROUP_M;
    const int rows_here = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + in_group % rows_here, tile_n = in_group / rows_here;
    const int m0 = tile_m * BM, n0 = tile_n * BN;

    const saddr_t smem_base = shared_address(smem);
    // ---- this thread's copy chunks: A rows a_row + i * kARowStep, chunk a_col; B rows b_row + i * kBRowStep,
    // chunk b_col. Pointers advance by one slice per load; a chunk outside the matrix is zero-filled and its
    // source address replaced by the matrix's first element, so no address outside a buffer is ever formed.
    const int a_row = tid / kAChunks, a_col = tid % kAChunks;
    const int b_row = tid / kBChunks, b_col = tid % kBChunks;
    const __nv_bfloat16* a_src = A + (size_t)(m0 + a_row) * K + a_col * 8;
    const __nv_bfloat16* b_src = B + (size_t)b_row * N + n0 + b_col * 8;
    const size_t a_step = (size_t)kARowStep * K, b_step = (size_t)kBRowStep * N, b_slice = (size_t)BK * N;
    uint32_t a_rows_ok = 0;  // bit i: row a_row + i * kARowStep is inside M
#pragma unroll
    for (int i = 0; i < kALoads; ++i)
        if (m0 + a_row + i * kARowStep < M) a_rows_ok |= 1u << i;
    const bool b_col_ok = n0 + b_col * 8 < N;
    const saddr_t a_dst0 = shared_address(smem) + a_row * kARowBytes + swizzle_a(a_row, a_col) * 16;
    const saddr_t b_dst0 = shared_address(smem) + kAStageBytes + b_row * kBRowBytes;

    const int k_tiles = (K + BK - 1) / BK;
    int k_load = 0;  // first k of the next slice to load
    auto load_slice = [&](int stage) {
        const bool a_k_ok = k_load + a_col * 8 < K;
#pragma unroll
        for (int i = 0; i < kALoads; ++i) {  // kARowStep is a multiple of 8: every row has a_row's swizzle
            const bool ok = a_k_ok && (a_rows_ok >> i & 1u);
            async_copy16(a_dst0 + stage * kStageBytes + i * kARowStep * kARowBytes, ok ? a_src + i * a_step : A, ok);
        }
#pragma unroll
        for (int i = 0; i < kBLoads; ++i) {
            const int r = b_row + i * kBRowStep;
            const bool ok = b_col_ok && k_load + r < K;
            async_copy16(b_dst0 + stage * kStageBytes + i * kBRowStep * kBRowBytes + swizzle_b(r, b_col) * 16,
                         ok ? b_src + i * b_step : B, ok);
        }
        a_src += BK;
        b_src += b_slice;
        k_load += BK;
    };

    // ---- this lane's ldmatrix addresses (within a stage)
    const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;
    const int lrow = lane & 15, lhalf = lane >> 4;  // row within a 16-row block, which 8-column half
    // A: row warp_m * WM + mt * 16 + lrow, logical chunk 2 kk + lhalf; the swizzle depends on the row only
    // through lane & 7, and XOR distributes over the disjoint bits of 2 kk and lhalf.
    const int a_lane_row = warp_m * WM + lrow;
    const int a_lane_chunk = swizzle_a(a_lane_row, lhalf);
    // B: row kk * 16 + lrow, logical chunk warp_n * WN / 8 + 2 np + lhalf (np: pair of n8 tiles).
    const int b_lane_chunk = swizzle_b(lrow, warp_n * (WN / 8) + lhalf);

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

    // ---- prologue: STAGES - 1 slices in flight
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_slice(s);
        async_commit();
    }

    // ---- main loop. Fragments are double-buffered in registers: those of step kk + 1 are loaded while the
    // mmas of step kk run. Before the last step of a slice, the wait and barrier for the next slice come
    // first, so its first fragments are loaded under the last mmas of this one; the buffer that the cp.async
    // copies of iteration kt overwrite (slice kt - 1's) was last read before that barrier.
    constexpr int kSteps = BK / 16;
    uint32_t a[2][kMT][4], b[2][kNT][2];
    int read_stage = 0, write_stage = STAGES - 1;
    auto load_fragments = [&](int buf, int stage, int kk) {
        const saddr_t a_base = smem_base + stage * kStageBytes + a_lane_row * kARowBytes;
        const saddr_t b_base = smem_base + stage * kStageBytes + kAStageBytes + (kk * 16 + lrow) * kBRowBytes;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
            ldsm_x4(a[buf][mt], a_base + mt * 16 * kARowBytes + ((a_lane_chunk ^ (2 * kk)) << 4));
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np)
            ldsm_x4_trans(b[buf][2 * np][0], b[buf][2 * np][1], b[buf][2 * np + 1][0], b[buf][2 * np + 1][1],
                          b_base + ((b_lane_chunk ^ (2 * np)) << 4));
    };

    async_wait<STAGES - 2>();  // slice 0 has landed (this thread's copies) ...
    __syncthreads();           // ... and everyone's
    load_fragments(0, 0, 0);
    for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
            if (kk == kSteps - 1) {
                read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
                async_wait<STAGES - 2>();  // slice kt + 1 has landed
                __syncthreads();           // everyone's copies, and everyone has read slice kt's last fragments
            }
            load_fragments((kk + 1) & 1, read_stage, (kk + 1) % kSteps);
            if (kk == 0) {
                const int next = kt + STAGES - 1;
                if (next < k_tiles) load_slice(write_stage);
                async_commit();
                write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
            }
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt) mma_16816(acc[mt][nt], a[kk & 1][mt], b[kk & 1][nt]);
        }
    }

    // ---- epilogue: bf16 tile staged in shared memory, then 16-byte row-contiguous stores
    async_wait<0>();
    __syncthreads();  // every warp is done with the ring: it becomes the staging tile
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
            const int r = warp_m * WM + mt * 16 + g, c = warp_n * WN + nt * 8 + 2 * t;
            *reinterpret_cast<__nv_bfloat162*>(smem + r * kCRowBytes + c * 2) =
                __floats2bfloat162_rn(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<__nv_bfloat162*>(smem + (r + 8) * kCRowBytes + c * 2) =
                __floats2bfloat162_rn(acc[mt][nt][2], acc[mt][nt][3]);
        }
    __syncthreads();
    const int c_col = tid % kBChunks, c_row = tid / kBChunks;
    const bool c_col_ok = n0 + c_col * 8 < N;
#pragma unroll
    for (int i = 0; i < kCChunks; ++i) {
        const int r = c_row + i * kBRowStep;
        if (c_col_ok && m0 + r < M)
            *reinterpret_cast<uint4*>(C + (size_t)(m0 + r) * N + n0 + c_col * 8) =
                *reinterpret_cast<const uint4*>(smem + r * kCRowBytes + c_col * 16);
    }
}
