// Baseline sum: one element per thread, a shared-memory tree per block, one atomicAdd per block.
// `out` starts at 0 (the task declares it). BLOCK must be a power of two.
#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void reduce_sum(const float* x, float* out, int n)
{
    __shared__ float s[BLOCK];
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
