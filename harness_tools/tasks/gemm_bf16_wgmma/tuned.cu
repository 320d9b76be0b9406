// Tunable bf16 GEMM on Hopper's warpgroup tensor-core instructions: C[M,N] = A[M,K] * B[K,N], all row-major bf16,
// fp32 accumulation. Requires N and K to be multiples of 8 (task.json's size_rules: every row then starts 16-byte
// aligned); any M. Needs sm_90a (wgmma.mma_async): the task's tunables carry the NVRTC option --arch-specific.
//
// Structure:
// - Grid: one block per 128 x BN tile of C, 1-D, raster-swizzled: GROUP_M consecutive tile rows are walked column
//   by column, so the blocks resident at one time share A rows and B columns in L2.
// - Block: 256 threads, two warpgroups; warpgroup w computes rows 64 w .. 64 w + 63 of the tile, all BN columns,
//   with wgmma.mma_async.m64nBNk16 (bf16 x bf16 -> fp32; A and B both read from shared memory through matrix
//   descriptors; BN / 2 fp32 accumulators per thread).
// - Main loop over 64-deep k slices: slices of A (128 x 64) and B (64 x BN) go global -> shared with 16-byte
//   cp.async (L1 bypassed) into a ring of STAGES buffers, issued by all 256 threads; STAGES - 1 slices are in
//   flight while one is multiplied. Chunks outside the matrix (M, N or K edge) are zero-filled by the copy
//   itself (src-size 0), so partial tiles need no other special case. Per slice: wait for this thread's copies of
//   the slice, fence.proxy.async (the copies are generic-proxy writes, wgmma reads through the async proxy),
//   barrier; each warpgroup issues its 4 wgmma (k = 16 each) as one group and waits until only this group is in
//   flight (wgmma.wait_group 1: the previous slice's group is complete), a second barrier (both warpgroups are done
//   with the previous slice), then the refill of the previous slice's buffer is issued while the tensor cores
//   work on this one.
// - Shared layout, 128-byte swizzle (what the descriptors' swizzle mode 1 expects; every stage 1024-byte
//   aligned): A is K-major, one 128-byte row per m (64 k), 16-byte chunk c of row r stored at chunk c ^ (r % 8);
//   8-row groups 1024 bytes apart (the descriptor's stride byte offset), k steps of 16 move the start address by
//   32 bytes. B is MN-major (n contiguous, wgmma's transpose flag for B): BN / 64 column bands of 64 n, each
//   64 k rows of 128 bytes (chunk c of row k at c ^ (k % 8)); 8-row groups along k 1024 bytes apart (stride byte
//   offset), bands 8 KiB apart (leading byte offset); k steps of 16 move the start address by 2 KiB.
// - Epilogue: after the last group, the fp32 accumulators are rounded once to bf16, staged through shared
//   memory (rows padded by 16 bytes: conflict-free) and written as 16-byte row-contiguous chunks, masked at the
//   M and N edges.
// Tunables (#defines): BN (128 or 256), STAGES (ring depth), GROUP_M (raster group), MINB (blocks per SM for
// __launch_bounds__). Threads per block: 256. Dynamic shared memory: STAGES * (128 * 64 + 64 * BN) * 2 + 1024
// bytes (the 1024 let the ring start 1024-byte aligned).
#include <cuda_bf16.h>
#include <stdint.h>

#ifndef BN
#define BN 256
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

constexpr int kBM = 128, kBK = 64;                      // tile rows, slice depth (64 bf16 = one 128-byte row)
constexpr int kThreads = 256;                           // two warpgroups
constexpr int kAcc = BN / 2;                            // fp32 accumulators per thread (m64nBN: 64 * BN / 128)
constexpr int kAStageBytes = kBM * kBK * 2;             // 16 KiB
constexpr int kBBandBytes = kBK * 128;                  // one 64-column band of B: 64 rows of 128 bytes, 8 KiB
constexpr int kBStageBytes = kBK * BN * 2;
constexpr int kStageBytes = kAStageBytes + kBStageBytes;
constexpr int kBChunks = BN / 8;                        // 16-byte chunks per row of a B slice (and of C)
constexpr int kALoads = kBM * 8 / kThreads;             // A chunks per thread and slice: 4
constexpr int kBLoads = kBK * kBChunks / kThreads;      // B chunks per thread and slice: BN / 32
constexpr int kARowStep = kThreads / 8, kBRowStep = kThreads / kBChunks;  // rows between a thread's chunks
constexpr int kCRowBytes = BN * 2 + 16;                 // epilogue staging row (padded)
constexpr int kCChunks = kBM * kBChunks / kThreads;

static_assert(BN == 128 || BN == 256, "BN is 128 or 256 (the wgmma shapes wrapped below)");
static_assert(STAGES >= 2, "at least double buffering");
static_assert(kStageBytes % 1024 == 0, "every stage starts 1024-byte aligned (the swizzle atom)");
static_assert(kARowStep % 8 == 0 && kBRowStep % 8 == 0, "a thread's rows share one swizzle phase");
static_assert(kBM * kCRowBytes <= STAGES * kStageBytes, "the epilogue tile fits in the ring");

// ---- PTX wrappers: the only inline assembly --------------------------------------------------------------
__device__ __forceinline__ uint32_t shared_address(const void* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, L2 only; with valid == false nothing is read and the 16 bytes are zero-filled.
__device__ __forceinline__ void async_copy16(uint32_t dst, const void* src, bool valid)
{
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void async_wait()  // at most N of this thread's committed copy groups in flight
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes (the landed cp.async copies) before later
// async-proxy reads (wgmma's operand fetch), once a barrier has passed.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait()  // at most N of this warpgroup's wgmma groups still in flight
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accesses of the accumulators across the asynchronous wgmma window.
__device__ __forceinline__ void fence_accumulators(float (&d)[kAcc])
{
#pragma unroll
    for (int i = 0; i < kAcc; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x N, fp32) = A (64 x 16, K-major, descriptor desc_a) * B (16 x N, MN-major: trans-b = 1, desc_b)
// + (scale_d ? d : 0). Accumulator layout: thread 32 q + 4 g + t of the warpgroup holds, for each 8-column block
// j, (row 16 q + g, columns 8 j + 2 t, + 1) in d[4 j], d[4 j + 1] and row 16 q + g + 8 in d[4 j + 2], d[4 j + 3].
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
        " %64, %65, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d)
        : "memory");
}

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d)
{
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
        " %128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d)
        : "memory");
}
// ---- end of PTX wrappers -----------------------------------------------------------------------------------

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4), 128-byte swizzle.
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)(leading_bytes >> 4) << 16 |
           (uint64_t)(stride_bytes >> 4) << 32 | 1ull << 62;
}

__device__ __forceinline__ void wgmma_step(float (&d)[kAcc], uint64_t desc_a, uint64_t desc_b, int scale_d)
{
#if BN == 256
    wgmma_m64n256k16(d, desc_a, desc_b, scale_d);
#else
    wgmma_m64n128k16(d, desc_a, desc_b, scale_d);
#endif
}

extern "C" __global__ void __launch_bounds__(kThreads, MINB) gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                                       __nv_bfloat16* C, int M, int N, int K)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const int tid = threadIdx.x, warpgroup = tid >> 7;
    // the ring starts at the first 1024-byte boundary (the launch adds 1024 bytes for this)
    const uint32_t raw_base = shared_address(smem_raw);
    const uint32_t base = (raw_base + 1023u) & ~1023u;
    unsigned char* const smem = smem_raw + (base - raw_base);

    // ---- which tile: GROUP_M tile rows at a time, column by column within the group
    const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + BN - 1) / BN;
    const int per_group = GROUP_M * tiles_n;
    const int group = blockIdx.x / per_group, in_group = blockIdx.x % per_group;
    const int first_m = group * GROUP_M;
    const int rows_here = min(tiles_m - first_m, GROUP_M);
    const int tile_m = first_m + in_group % rows_here, tile_n = in_group / rows_here;
    const int m0 = tile_m * kBM, n0 = tile_n * BN;

    // ---- this thread's copy chunks. A: rows a_row + 32 i, logical chunk a_col (k 8 a_col ..); B: rows
    // b_row + kBRowStep i, chunk b_col (n 8 b_col ..). A chunk outside the matrix is zero-filled and its source
    // address replaced by the matrix's first element, so no address outside a buffer is ever formed.
    const int a_row = tid >> 3, a_col = tid & 7;
    const int b_row = tid / kBChunks, b_col = tid % kBChunks;
    const __nv_bfloat16* a_src = A + (size_t)(m0 + a_row) * K + a_col * 8;
    const __nv_bfloat16* b_src = B + (size_t)b_row * N + n0 + b_col * 8;
    const size_t a_step = (size_t)kARowStep * K, b_step = (size_t)kBRowStep * N, b_slice = (size_t)kBK * N;
    uint32_t a_rows_ok = 0;  // bit i: row a_row + 32 i is inside M
#pragma unroll
    for (int i = 0; i < kALoads; ++i)
        if (m0 + a_row + i * kARowStep < M) a_rows_ok |= 1u << i;
    const bool b_col_ok = n0 + b_col * 8 < N;
    const uint32_t a_dst0 = base + a_row * 128 + ((a_col ^ (a_row & 7)) << 4);
    const uint32_t b_dst0 = base + kAStageBytes + (b_col >> 3) * kBBandBytes + b_row * 128 +
                            (((b_col & 7) ^ (b_row & 7)) << 4);

    const int k_tiles = (K + kBK - 1) / kBK;
    int k_load = 0;  // first k of the next slice to load
    auto load_slice = [&](int stage) {
        const bool a_k_ok = k_load + a_col * 8 < K;
#pragma unroll
        for (int i = 0; i < kALoads; ++i) {
            const bool ok = a_k_ok && (a_rows_ok >> i & 1u);
            async_copy16(a_dst0 + stage * kStageBytes + i * kARowStep * 128, ok ? a_src + i * a_step : A, ok);
        }
#pragma unroll
        for (int i = 0; i < kBLoads; ++i) {
            const bool ok = b_col_ok && k_load + b_row + i * kBRowStep < K;
            async_copy16(b_dst0 + stage * kStageBytes + i * kBRowStep * 128, ok ? b_src + i * b_step : B, ok);
        }
        a_src += kBK;
        b_src += b_slice;
        k_load += kBK;
    };

    // ---- descriptors of stage 0, k step 0; a stage adds kStageBytes, a k step 32 bytes (A) or 2 KiB (B)
    // (MN-major B: the leading byte offset steps between 64-column bands, the stride byte offset between 8-row
    // groups along k; swapped, the B operand reads wrong elements, seen on the H200)
    const uint64_t desc_b0 = descriptor(base + kAStageBytes, kBBandBytes, 1024);
    // (K-major A with 128-byte swizzle: the leading byte offset is unused, 16 by convention)
    const uint64_t desc_a0 = descriptor(base + warpgroup * 64 * 128, 16, 1024);

    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

    // ---- prologue: STAGES - 1 slices in flight
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles) load_slice(s);
        async_commit();
    }

    int stage = 0, write_stage = STAGES - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        async_wait<STAGES - 2>();  // slice kt has landed (this thread's copies) ...
        fence_proxy_async();       // ... visible to the async proxy ...
        __syncthreads();           // ... everyone's
        fence_accumulators(acc);
        wgmma_fence();
        const uint64_t stage_off = (uint64_t)((stage * kStageBytes) >> 4);
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)
            wgmma_step(acc, desc_a0 + stage_off + kk * (32 >> 4), desc_b0 + stage_off + kk * (2048 >> 4), 1);
        wgmma_commit();
        wgmma_wait<1>();  // this warpgroup's group of slice kt - 1 is complete
        fence_accumulators(acc);
        __syncthreads();  // both warpgroups': the buffer of slice kt - 1 may be overwritten
        if (kt + STAGES - 1 < k_tiles) load_slice(write_stage);
        async_commit();
        write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
        stage = stage == STAGES - 1 ? 0 : stage + 1;
    }
    wgmma_wait<0>();
    fence_accumulators(acc);

    // ---- epilogue: bf16 tile staged in shared memory, then 16-byte row-contiguous stores
    async_wait<0>();
    __syncthreads();  // every warpgroup is done with the ring: it becomes the staging tile
    const int lane = tid & 31, q = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
    const int r0 = warpgroup * 64 + q * 16 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int c = j * 8 + 2 * t;
        *reinterpret_cast<__nv_bfloat162*>(smem + r0 * kCRowBytes + c * 2) =
            __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<__nv_bfloat162*>(smem + (r0 + 8) * kCRowBytes + c * 2) =
            __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
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
