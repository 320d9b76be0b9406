// Naive SGEMM: one thread per output element, C[M,N] = A[M,K] * B[K,N], all row-major fp32.
// Reads of B are coalesced across a warp; reads of A are a broadcast of one row. No reuse through
// shared memory, so every product term is fetched from global memory (through the caches).
extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    const float* a = A + (size_t)row * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += a[k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
