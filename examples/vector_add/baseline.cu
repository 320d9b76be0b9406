// Baseline vector sum: one element per thread, 256 threads per block (grid ceil_div(n, 256)).
extern "C" __global__ void vector_add(float* c, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
