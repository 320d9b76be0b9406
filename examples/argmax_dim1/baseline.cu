// Baseline argmax over the middle dimension: one thread per output (b, j), 256 threads per block, walking
// d = 0 .. D-1 down its column. Neighbouring threads take neighbouring j, so every step is a coalesced row
// segment. A strictly greater value replaces the best, so ties keep the first index.
extern "C" __global__ void argmax_dim1(const float* x, long long* out, int B, int D, int J)
{
    const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= (long long)B * J) return;
    const int b = (int)(o / J), j = (int)(o % J);
    const float* col = x + (size_t)b * D * J + j;
    float best = col[0];
    int index = 0;
    for (int d = 1; d < D; ++d) {
        const float v = col[(size_t)d * J];
        if (v > best) {
            best = v;
            index = d;
        }
    }
    out[o] = index;
}
