// Tiled transpose through shared memory. A block moves one TR x TC tile of `in` (TR rows, TC columns):
// every thread first issues all its loads (TR*TC/THREADS floats, all in flight together), then, after a
// barrier, writes them to shared memory, and after a second barrier reads columns of the tile and writes
// them as rows of `out`. When rows and cols are both multiples of VEC (and the pointers allow it) each
// access moves VEC floats (float2/float4): fewer memory instructions; otherwise every access is a float, so
// odd-sized matrices (unaligned rows) stay correct.
// A warp always covers VEC rows x 32 floats (128 bytes per row, full lines), and with the tile padded to
// TC+1 columns both the row-wise writes and the column-wise reads of shared memory hit 32 distinct banks.
//
// Tunables (#defines): TR, TC tile rows and columns (multiples of 32; TR is also the length of each row
// segment written to `out`, TC of each one read from `in`); THREADS per block (1-D); VEC 1, 2 or 4 floats
// per access on the vector path; CS 1 loads with __ldcs (streaming, evict-first in L2: the input is read
// once, so it does not push older lines out of L2), 0 with plain loads.
#ifndef TR
#define TR 64
#endif
#ifndef TC
#define TC 64
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef CS
#define CS 0
#endif

// Plain loads, not __ldg: the compiler moves read-only (.nc) loads across the barrier below, which would
// undo what it is there for.
#if CS
#define LOAD(p) __ldcs(p)
#else
#define LOAD(p) (*(p))
#endif

__device__ __forceinline__ void load_vec(const float* p, float (&v)[1]) { v[0] = LOAD(p); }
__device__ __forceinline__ void load_vec(const float* p, float (&v)[2])
{
    const float2 t = LOAD(reinterpret_cast<const float2*>(p));
    v[0] = t.x, v[1] = t.y;
}
__device__ __forceinline__ void load_vec(const float* p, float (&v)[4])
{
    const float4 t = LOAD(reinterpret_cast<const float4*>(p));
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
__device__ __forceinline__ void store_vec(float* p, const float (&v)[1]) { *p = v[0]; }
__device__ __forceinline__ void store_vec(float* p, const float (&v)[2])
{
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
}
__device__ __forceinline__ void store_vec(float* p, const float (&v)[4])
{
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

// One tile with V floats per access. A warp's 32 lanes cover V rows x 32 columns: lane / (32 / V) picks the
// row, (lane % (32 / V)) * V the first column. With V > 1, rows % V == 0 and cols % V == 0, so a vector is
// wholly inside the matrix or wholly outside.
template <int V>
__device__ __forceinline__ void move_tile(const float* in, float* out, int rows, int cols, float (&tile)[TR][TC + 1])
{
    constexpr int WARPS = THREADS / 32;
    constexpr int PER = TR * TC / (32 * V) / WARPS;  // V x 32 patches per warp, the same in both phases
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int lr = lane / (32 / V), lc = (lane % (32 / V)) * V;
    const int r0 = blockIdx.y * TR, c0 = blockIdx.x * TC;

    float v[PER][V];
#pragma unroll
    for (int i = 0; i < PER; ++i) {  // all loads first, so that they are in flight together
        const int p = warp + i * WARPS;
        const int tr = (p / (TC / 32)) * V + lr, tc = (p % (TC / 32)) * 32 + lc;
        if (r0 + tr < rows && c0 + tc < cols) load_vec(in + (size_t)(r0 + tr) * cols + (c0 + tc), v[i]);
    }
    // Without this barrier the compiler may interleave the shared-memory stores with the loads, and every
    // store, waiting for its load, holds back the loads after it (about 5 of 16 in flight instead of 16).
    __syncthreads();
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int p = warp + i * WARPS;
        const int tr = (p / (TC / 32)) * V + lr, tc = (p % (TC / 32)) * 32 + lc;
        if (r0 + tr < rows && c0 + tc < cols) {
#pragma unroll
            for (int k = 0; k < V; ++k) tile[tr][tc + k] = v[i][k];
        }
    }
    __syncthreads();

    // Row c0 + tc of `out` holds column c0 + tc of `in`; its columns r0 .. r0 + TR - 1 are rows of the tile.
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int p = warp + i * WARPS;
        const int tc = (p / (TR / 32)) * V + lr, tr = (p % (TR / 32)) * 32 + lc;
        if (c0 + tc < cols && r0 + tr < rows) {
            float w[V];
#pragma unroll
            for (int k = 0; k < V; ++k) w[k] = tile[tr + k][tc];
            store_vec(out + (size_t)(c0 + tc) * rows + (r0 + tr), w);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) transpose(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TR][TC + 1];
    const bool vector_path = VEC > 1 && rows % VEC == 0 && cols % VEC == 0 &&
                             ((size_t)in | (size_t)out) % (4 * VEC) == 0;
    if (vector_path)
        move_tile<VEC>(in, out, rows, cols, tile);
    else
        move_tile<1>(in, out, rows, cols, tile);
}
