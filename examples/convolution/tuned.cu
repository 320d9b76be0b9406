// 2-d convolution with the scheme and tunables of Kernel Tuner's convolution example. Image and filter sizes
// are compile-time (#defined per case: image_width/height, filter_width/height, input_width/height); the
// filter is in __constant__ memory (d_filter), so every thread of a warp reads the same tap at once.
//
// A block of block_size_x x block_size_y threads computes a (block_size_y·tile_size_y) x (block_size_x·tile_size_x)
// tile of the output; thread (tx, ty) owns the tile_size_y x tile_size_x pixels at rows ty + yi·block_size_y and
// columns tx + xi·block_size_x. The block first copies the input window it needs, its tile plus a border of
// filter - 1 rows and columns, to shared memory (through the read-only cache with __ldg when read_only is 1),
// then every thread accumulates all filter taps over its pixels from shared memory. Bounds checks are compiled
// in only when the image is not a whole number of tiles. With use_padding = 1 and block_size_x not a multiple
// of 32 the shared rows are padded to a length congruent to block_size_x mod 32, so the rows of a warp fall on
// distinct banks. Launch: grid [ceil_div(W, block_size_x·tile_size_x), ceil_div(H, block_size_y·tile_size_y)],
// block [block_size_x, block_size_y].
#ifndef image_width
#define image_width 4096
#endif
#ifndef image_height
#define image_height 4096
#endif
#ifndef filter_width
#define filter_width 17
#endif
#ifndef filter_height
#define filter_height 17
#endif
#ifndef input_width
#define input_width (image_width + filter_width - 1)
#endif
#ifndef input_height
#define input_height (image_height + filter_height - 1)
#endif
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif
#ifndef use_padding
#define use_padding 1
#endif
#ifndef read_only
#define read_only 0
#endif

#define OUT_ROWS (block_size_y * tile_size_y)
#define OUT_COLS (block_size_x * tile_size_x)
#define WIN_ROWS (OUT_ROWS + filter_height - 1)
#define WIN_COLS (OUT_COLS + filter_width - 1)
#if use_padding && (block_size_x % 32 != 0) && ((WIN_COLS - block_size_x) % 32 != 0)
#define SH_COLS (WIN_COLS + ((block_size_x - WIN_COLS % 32 + 32) % 32))
#else
#define SH_COLS WIN_COLS
#endif
#define PARTIAL_TILES ((image_height % OUT_ROWS != 0) || (image_width % OUT_COLS != 0))

#if read_only
#define LOAD(p) __ldg(p)
#else
#define LOAD(p) (*(p))
#endif

__constant__ float d_filter[filter_height * filter_width];

extern "C" __global__ void __launch_bounds__(block_size_x * block_size_y)
convolution_kernel(float* output, const float* input)
{
    __shared__ float window[WIN_ROWS][SH_COLS];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * OUT_ROWS, col0 = blockIdx.x * OUT_COLS;

    for (int i = ty; i < WIN_ROWS; i += block_size_y)
        for (int j = tx; j < WIN_COLS; j += block_size_x) {
#if PARTIAL_TILES
            if (row0 + i < input_height && col0 + j < input_width)
#endif
                window[i][j] = LOAD(input + (size_t)(row0 + i) * input_width + col0 + j);
        }
    __syncthreads();

    float acc[tile_size_y][tile_size_x];
#pragma unroll
    for (int yi = 0; yi < tile_size_y; ++yi)
#pragma unroll
        for (int xi = 0; xi < tile_size_x; ++xi) acc[yi][xi] = 0.0f;

    for (int i = 0; i < filter_height; ++i)
#pragma unroll
        for (int j = 0; j < filter_width; ++j) {
            const float w = d_filter[i * filter_width + j];
#pragma unroll
            for (int yi = 0; yi < tile_size_y; ++yi)
#pragma unroll
                for (int xi = 0; xi < tile_size_x; ++xi)
                    acc[yi][xi] += window[ty + yi * block_size_y + i][tx + xi * block_size_x + j] * w;
        }

#pragma unroll
    for (int yi = 0; yi < tile_size_y; ++yi)
#pragma unroll
        for (int xi = 0; xi < tile_size_x; ++xi) {
            const int y = row0 + ty + yi * block_size_y, x = col0 + tx + xi * block_size_x;
#if PARTIAL_TILES
            if (y < image_height && x < image_width)
#endif
                output[(size_t)y * image_width + x] = acc[yi][xi];
        }
}
