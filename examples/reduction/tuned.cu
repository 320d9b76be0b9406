// Sum in Kernel Tuner's two steps (examples/cuda/reduction.cu): sum_floats, a grid of num_blocks blocks of
// block_size_x threads, strides over x and writes one partial sum per block into the scratch buffer `partials`;
// sum_floats_final, one block of block_size_x threads, adds the num_blocks partial sums and writes out[0].
//
// Tunables (#defines): block_size_x threads per block (a power of two); vector, the width of each load (1, 2
// or 4 floats: float, float2, float4; x starts 16-byte aligned, and the n % vector floats past the last whole
// vector are added by thread 0 of block 0); num_blocks, the first grid (the stride of the loop is num_blocks·
// block_size_x vectors); loop_unroll_factor_0, the unroll factor of the strided loop (0: no pragma, the
// compiler decides); use_shuffle 1 ends each block's shared-memory tree at 32 values and adds those with warp
// shuffles, 0 runs the tree to the end. Launches: [num_blocks] x [block_size_x], then [1] x [block_size_x].
#ifndef block_size_x
#define block_size_x 256
#endif
#ifndef vector
#define vector 4
#endif
#ifndef num_blocks
#define num_blocks 1024
#endif
#ifndef loop_unroll_factor_0
#define loop_unroll_factor_0 8
#endif
#ifndef use_shuffle
#define use_shuffle 1
#endif

#if vector == 1
typedef float floatvector;
__device__ __forceinline__ float lanes_sum(float v) { return v; }
#elif vector == 2
typedef float2 floatvector;
__device__ __forceinline__ float lanes_sum(float2 v) { return v.x + v.y; }
#else
typedef float4 floatvector;
__device__ __forceinline__ float lanes_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
#endif

#define PRAGMA_TEXT(text) _Pragma(#text)
#define UNROLL_BY(factor) PRAGMA_TEXT(unroll factor)

// The sum of every thread's v in the block, valid in thread 0.
__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float s[block_size_x];
    const int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
#if use_shuffle
    constexpr int stop = 32;
#else
    constexpr int stop = 1;
#endif
#pragma unroll
    for (int half = block_size_x / 2; half >= stop; half >>= 1) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
#if use_shuffle
    if (t < 32) {  // block_size_x >= 32: s[0..31] hold the block's 32 partial sums
        v = s[t];
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
#else
    return s[0];
#endif
}

extern "C" __global__ void __launch_bounds__(block_size_x) sum_floats(float* partials, const float* x, int n)
{
    const floatvector* xv = reinterpret_cast<const floatvector*>(x);
    const int count = n / vector;
    float sum = 0.0f;
#if loop_unroll_factor_0 > 0
    UNROLL_BY(loop_unroll_factor_0)
#endif
    for (int i = blockIdx.x * block_size_x + threadIdx.x; i < count; i += num_blocks * block_size_x)
        sum += lanes_sum(xv[i]);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int i = count * vector; i < n; ++i) sum += x[i];  // at most vector - 1 floats
    sum = block_sum(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

extern "C" __global__ void __launch_bounds__(block_size_x) sum_floats_final(const float* partials, float* out, int count)
{
    float sum = 0.0f;
    for (int i = threadIdx.x; i < count; i += block_size_x) sum += partials[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[0] = sum;
}
