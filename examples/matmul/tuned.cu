// C = A B for square WIDTH x WIDTH matrices with the tiling of Kernel Tuner's matmul example (after V. Volkov,
// "Better performance at lower occupancy"): WIDTH is #defined per case, the block and tile sizes are tunables.
//
// A block of block_size_x x block_size_y threads computes a (block_size_y·tile_size_y) x (block_size_x·tile_size_x)
// tile of C; thread (tx, ty) owns the tile_size_y x tile_size_x elements at rows ty + i·block_size_y and columns
// tx + j·block_size_x, so every store and every shared-memory read of a warp is consecutive. The k loop walks
// slices of depth block_size_x, which must equal block_size_y·tile_size_y (the space's constraint): then the
// slice of A is a square (block_size_y·tile_size_y)² tile and each thread copies tile_size_y elements of it and
// tile_size_y·tile_size_x of the slice of B. WIDTH must be a multiple of both tile sides and of block_size_x:
// the task keeps N a multiple of 512, the largest of them. Launch: grid [N / (block_size_x·tile_size_x),
// N / (block_size_y·tile_size_y)], block [block_size_x, block_size_y].
#ifndef WIDTH
#define WIDTH 4096
#endif
#ifndef block_size_x
#define block_size_x 32
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef tile_size_x
#define tile_size_x 4
#endif
#ifndef tile_size_y
#define tile_size_y 4
#endif

#define TILE_ROWS (block_size_y * tile_size_y)  // rows of C per block, and the depth of a k slice
#define TILE_COLS (block_size_x * tile_size_x)  // columns of C per block

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
matmul_kernel(float* C, const float* A, const float* B)
{
    __shared__ float As[TILE_ROWS][block_size_x];
    __shared__ float Bs[block_size_x][TILE_COLS];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE_ROWS, col0 = blockIdx.x * TILE_COLS;

    float acc[tile_size_y][tile_size_x];
#pragma unroll
    for (int i = 0; i < tile_size_y; ++i)
#pragma unroll
        for (int j = 0; j < tile_size_x; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < WIDTH; k0 += block_size_x) {
#pragma unroll
        for (int i = 0; i < tile_size_y; ++i) {
            const int r = ty + i * block_size_y;  // 0 .. TILE_ROWS - 1 == 0 .. block_size_x - 1
            As[r][tx] = A[(size_t)(row0 + r) * WIDTH + k0 + tx];
#pragma unroll
            for (int j = 0; j < tile_size_x; ++j)
                Bs[r][tx + j * block_size_x] = B[(size_t)(k0 + r) * WIDTH + col0 + tx + j * block_size_x];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < block_size_x; ++k) {
            float b[tile_size_x];
#pragma unroll
            for (int j = 0; j < tile_size_x; ++j) b[j] = Bs[k][tx + j * block_size_x];
#pragma unroll
            for (int i = 0; i < tile_size_y; ++i) {
                const float a = As[ty + i * block_size_y][k];
#pragma unroll
                for (int j = 0; j < tile_size_x; ++j) acc[i][j] += a * b[j];
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < tile_size_y; ++i)
#pragma unroll
        for (int j = 0; j < tile_size_x; ++j)
            C[(size_t)(row0 + ty + i * block_size_y) * WIDTH + col0 + tx + j * block_size_x] = acc[i][j];
}
