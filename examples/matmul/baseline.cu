// Baseline C = A B for square WIDTH x WIDTH matrices (WIDTH is #defined per case from the size N): one thread
// per element of C, 16 x 16 threads per block, every operand read from global memory.
#ifndef WIDTH
#define WIDTH 4096
#endif

extern "C" __global__ void matmul_naive(float* C, const float* A, const float* B)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= WIDTH || y >= WIDTH) return;
    float sum = 0.0f;
    for (int k = 0; k < WIDTH; ++k) sum += A[y * WIDTH + k] * B[k * WIDTH + x];
    C[y * WIDTH + x] = sum;
}
