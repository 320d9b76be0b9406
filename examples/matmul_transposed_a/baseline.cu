// Baseline C = A^T B: one thread per element of C, a 16x16 block of threads per 16x16 tile of C.
// A is K x M and B is K x N (row-major), so for every k the threads of a row of the block read consecutive
// elements of B (coalesced) and one element of A (a broadcast).
extern "C" __global__ void matmul_transposed_a(const float* A, const float* B, float* C, int M, int N, int K)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)k * M + m] * B[(size_t)k * N + n];
    C[(size_t)m * N + n] = acc;
}
