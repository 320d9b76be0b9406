// Baseline row softmax: one thread per row, three passes (row max, sum of exp(x - max), write).
// Neighbouring threads walk different rows, so loads are uncoalesced; this is the slow reference point.
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    float m = xr[0];
    for (int c = 1; c < cols; ++c) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) yr[c] = expf(xr[c] - m) / s;
}
