// Baseline split softmax: each row is cut into chunks of CHUNK columns, one block of THREADS threads per
// (chunk, row). Pass 1 writes every chunk's max m_c and s_c = sum of exp(x - m_c) to the scratch buffer stats;
// pass 2 combines a row's chunk statistics into its max M and sum S = sum_c s_c * exp(m_c - M) (each block of
// the row does it again: the statistics are tiny) and writes y = exp(x - M) / S over its own chunk.
#define LOWEST (-3.402823466e38f)

__device__ float block_reduce(float v, float* s, bool take_max)
{
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            s[threadIdx.x] = take_max ? fmaxf(s[threadIdx.x], s[threadIdx.x + w]) : s[threadIdx.x] + s[threadIdx.x + w];
        __syncthreads();
    }
    const float r = s[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_chunk_stats(const float* x, float* stats, int rows, int cols)
{
    __shared__ float s[THREADS];
    const int r = blockIdx.y;
    const int c0 = blockIdx.x * CHUNK, c1 = min(c0 + CHUNK, cols);
    const float* xr = x + (size_t)r * cols;
    float m = LOWEST;
    for (int c = c0 + threadIdx.x; c < c1; c += THREADS) m = fmaxf(m, xr[c]);
    m = block_reduce(m, s, true);
    float sum = 0.0f;
    for (int c = c0 + threadIdx.x; c < c1; c += THREADS) sum += expf(xr[c] - m);
    sum = block_reduce(sum, s, false);
    if (threadIdx.x == 0) {
        float* st = stats + 2 * ((size_t)r * gridDim.x + blockIdx.x);
        st[0] = m;
        st[1] = sum;
    }
}

extern "C" __global__ void softmax_chunk_write(const float* x, const float* stats, float* y, int rows, int cols)
{
    __shared__ float s[THREADS];
    const int r = blockIdx.y, chunks = gridDim.x;
    const float* st = stats + 2 * (size_t)r * chunks;
    float big = LOWEST;
    for (int k = threadIdx.x; k < chunks; k += THREADS) big = fmaxf(big, st[2 * k]);
    big = block_reduce(big, s, true);
    float total = 0.0f;
    for (int k = threadIdx.x; k < chunks; k += THREADS) total += st[2 * k + 1] * expf(st[2 * k] - big);
    total = block_reduce(total, s, false);
    const float inv = 1.0f / total;
    const int c0 = blockIdx.x * CHUNK, c1 = min(c0 + CHUNK, cols);
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    for (int c = c0 + threadIdx.x; c < c1; c += THREADS) yr[c] = expf(xr[c] - big) * inv;
}
