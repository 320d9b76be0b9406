// Sum through float4 loads: the vector is cut into chunks of BLOCK * ITEMS float4s, and block b of G takes
// chunks [b * C / G, (b + 1) * C / G) of the C chunks, so every block gets the same work (to one chunk) and
// all blocks end together. Per chunk every thread issues ITEMS float4 loads together, so several are in
// flight (ptxas keeps 4 to 8 per thread within 32 registers); the sum then goes through warp shuffles, one
// shared-memory step across warps and one atomicAdd per block (`out` starts at 0).
//
// Tunables (#defines): BLOCK threads per block (a multiple of 32); ITEMS float4 loads per thread per chunk;
// GRID_THREADS, used only by the launch, caps the grid at GRID_THREADS / BLOCK blocks (a grid that is
// resident at once instead of waves of short-lived blocks; small n gets fewer blocks, one chunk each);
// CS 1 loads with __ldcs (streaming, evict-first in L2: x is read once, so it does not push older lines
// out of L2), 0 with __ldg.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef CS
#define CS 0
#endif

#if CS
#define LOAD(p) __ldcs(p)
#else
#define LOAD(p) __ldg(p)
#endif

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// 2048 / BLOCK blocks per SM: at most 32 registers, so every SM holds 2048 threads (GRID_THREADS = 262144
// is then one wave on a GPU with 128 or more SMs).
extern "C" __global__ void __launch_bounds__(BLOCK, 2048 / BLOCK) reduce_sum(const float* x, float* out, int n)
{
    // float4 loads need 16-byte alignment: the first `head` scalars (0 for an allocation's start) and
    // the last (n - head) % 4 are added by block 0, one per thread.
    const int head = min(n, (int)((16 - ((size_t)x & 15)) & 15) / 4);
    const float4* x4 = reinterpret_cast<const float4*>(x + head);
    const long long nvec = (n - head) / 4;
    constexpr int CHUNK = BLOCK * ITEMS;  // float4s per chunk
    const long long full = nvec / CHUNK, chunks = (nvec + CHUNK - 1) / CHUNK;
    const long long first = chunks * blockIdx.x / gridDim.x, last = chunks * (blockIdx.x + 1) / gridDim.x;

    float acc = 0.0f;
    for (long long c = first; c < min(last, full); ++c) {  // whole chunks: no bounds checks
        const float4* p = x4 + c * CHUNK + threadIdx.x;
        float4 v[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) v[i] = LOAD(p + i * BLOCK);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) acc += sum4(v[i]);
    }
    if (last > full) {  // the one partial chunk, if any, is the last block's last
        const long long base = full * CHUNK + threadIdx.x;
        float4 v[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            v[i] = base + i * BLOCK < nvec ? LOAD(x4 + base + i * BLOCK) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) acc += sum4(v[i]);
    }
    if (blockIdx.x == 0) {
        const int tail_start = head + (int)nvec * 4;
        if ((int)threadIdx.x < head) acc += x[threadIdx.x];
        if ((int)threadIdx.x < n - tail_start) acc += x[tail_start + threadIdx.x];
    }

    __shared__ float warp_sums[BLOCK / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    acc = warp_sum(acc);
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = warp_sum(lane < BLOCK / 32 ? warp_sums[lane] : 0.0f);
        if (lane == 0) atomicAdd(out, acc);
    }
}
