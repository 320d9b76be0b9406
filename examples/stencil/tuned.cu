// 5-point stencil in the form of Kernel Tuner's stencil example: the domain is compile-time (domain_width and
// domain_height, #defined per case from the sizes W and H) and so is the block (block_size_x, block_size_y:
// the tunables); one thread per point, x_new[y][x] = (centre + west + east + south + north) / 5 for interior
// points, in that order of additions; the boundary of x_new is not written.
// Launch: grid [ceil_div(W, block_size_x), ceil_div(H, block_size_y)], block [block_size_x, block_size_y].
#ifndef domain_width
#define domain_width 4096
#endif
#ifndef domain_height
#define domain_height 2048
#endif
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 4
#endif

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y) stencil_kernel(float* x_new, const float* x_old)
{
    const int x = blockIdx.x * block_size_x + threadIdx.x;
    const int y = blockIdx.y * block_size_y + threadIdx.y;
    if (x > 0 && y > 0 && x < domain_width - 1 && y < domain_height - 1) {
        const int i = y * domain_width + x;
        x_new[i] = (x_old[i] + x_old[i - 1] + x_old[i + 1] + x_old[i + domain_width] + x_old[i - domain_width]) / 5.0f;
    }
}
