// Baseline sum in two launches: sum_partial gives one element to each thread and writes one partial sum per
// block of 256 threads (a shared-memory tree) into the scratch buffer `partials`; sum_final, one block of 1024
// threads, adds the ceil_div(n, 256) partial sums the same way and writes out[0].
#define BLOCK 256
#define FINAL 1024

extern "C" __global__ void sum_partial(float* partials, const float* x, int n)
{
    __shared__ float s[BLOCK];
    const int i = blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

extern "C" __global__ void sum_final(const float* partials, float* out, int count)
{
    __shared__ float s[FINAL];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < count; i += FINAL) acc += partials[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = FINAL / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = s[0];
}
