// Baseline transpose: one thread per element. Reads along a row of `in` are coalesced; the matching
// writes go down a column of `out`, one 32-byte sector per element.
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
