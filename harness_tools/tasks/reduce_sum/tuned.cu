// Grid-stride sum: every thread accumulates float4 loads in registers, then a warp-shuffle tree, then
// one shared-memory step across warps and one atomicAdd per block (`out` starts at 0).
//
// Tunables (#defines): BLOCK threads per block (a multiple of 32); ITEMS float4 loads per thread per
// grid pass, issued together so that several are in flight; PASSES, used only by the launch, sizes the
// grid so that each thread makes about PASSES grid passes (fewer blocks, fewer atomics).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK) reduce_sum(const float* x, float* out, int n)
{
    // float4 loads need 16-byte alignment: the first `head` scalars (0 for an allocation's start) and
    // the last (n - head) % 4 are added one per thread.
    const int head = min(n, (int)((16 - ((size_t)x & 15)) & 15) / 4);
    const float4* x4 = reinterpret_cast<const float4*>(x + head);
    const size_t nvec = (size_t)(n - head) / 4;
    const size_t chunk = (size_t)BLOCK * ITEMS;  // float4s one block covers per pass

    float acc = 0.0f;
    for (size_t base = blockIdx.x * chunk + threadIdx.x; base < nvec; base += gridDim.x * chunk) {
        float4 v[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const size_t j = base + (size_t)i * BLOCK;
            v[i] = j < nvec ? __ldg(x4 + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) acc += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    const int t = blockIdx.x * BLOCK + threadIdx.x;
    const int tail_start = head + (int)nvec * 4;
    if (t < head) acc += x[t];
    if (t < n - tail_start) acc += x[tail_start + t];

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
