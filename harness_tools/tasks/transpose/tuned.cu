// Tiled transpose through shared memory: a block reads a TILE x TILE tile of `in` row by row (coalesced)
// and writes it to `out` row by row (coalesced), swapping the roles of rows and columns in between.
// The +1 pad makes the column-wise shared reads hit 32 different banks.
//
// Tunables (#defines): TILE side of the tile; ROWS thread rows per block (block = TILE x ROWS threads),
// each thread handling TILE / ROWS elements of a column of the tile.
#ifndef TILE
#define TILE 32
#endif
#ifndef ROWS
#define ROWS 8
#endif

extern "C" __global__ void __launch_bounds__(TILE * ROWS) transpose(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;

    const int c = c0 + tx;
#pragma unroll
    for (int j = ty; j < TILE; j += ROWS) {
        const int r = r0 + j;
        if (r < rows && c < cols) tile[j][tx] = in[(size_t)r * cols + c];
    }
    __syncthreads();

    // Row c0 + j of `out` holds column c0 + j of `in`; thread tx writes its element r0 + tx.
    const int r = r0 + tx;
#pragma unroll
    for (int j = ty; j < TILE; j += ROWS) {
        const int oc = c0 + j;
        if (oc < cols && r < rows) out[(size_t)oc * rows + r] = tile[tx][j];
    }
}
