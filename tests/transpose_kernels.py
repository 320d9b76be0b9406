"""Transpose kernels the tests share: a tiled one whose barrier is a parameter, and a plain one that can
be made to write out of bounds. Line numbers are the ones error reports must name."""

from __future__ import annotations

# Shared-memory tiles; BARRIER is replaced by "__syncthreads();" (right) or "" (racy, same line numbers).
TILED_TRANSPOSE = """
#define TILE 32
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x, r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        if (r + j < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(r + j) * cols + c];
    BARRIER
    c = blockIdx.y * TILE + threadIdx.x; r = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        if (r + j < cols && c < rows) out[(size_t)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
}
"""
RACY_TRANSPOSE = TILED_TRANSPOSE.replace("BARRIER", "")
TILED_LAUNCH = {"grid": ["ceil_div(cols, 32)", "ceil_div(rows, 32)"], "block": [32, 8]}
TILE_STORE_LINE, TILE_LOAD_LINE = 7, 11

# One thread per element; the write lands 1024 elements past its place (out of bounds at the end).
OOB_WRITE = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)c * rows + r + 1024] = in[(size_t)r * cols + c];
}
"""
GOOD_TRANSPOSE = OOB_WRITE.replace(" + 1024]", "]")
OOB_READ = GOOD_TRANSPOSE.replace("in[(size_t)r * cols + c]", "in[(size_t)r * cols + c + 100000]")
OOB_LINE = 4
