// Vector sum in the style of Kernel Tuner's example: the block size is a compile-time constant,
// block_size_x (the tuner sets it; grid = ceil_div(n, block_size_x)), one element per thread.
#ifndef block_size_x
#define block_size_x 256
#endif

extern "C" __global__ void __launch_bounds__(block_size_x) vector_add(float* c, const float* a, const float* b, int n)
{
    const int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
