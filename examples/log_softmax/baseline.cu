// Baseline row log-softmax: one block of 256 threads per row and three passes over the row (the row maximum,
// the sum of exp(x - max), then the write), each reduced by a shared-memory tree.
#define BLOCK 256
#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no <math.h> INFINITY)

extern "C" __global__ void log_softmax(const float* x, float* y, int rows, int cols)
{
    __shared__ float red[BLOCK];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    const int t = threadIdx.x;

    float m = NEG_INF;
    for (int c = t; c < cols; c += BLOCK) m = fmaxf(m, xr[c]);
    red[t] = m;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) red[t] = fmaxf(red[t], red[t + stride]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();

    float s = 0.0f;
    for (int c = t; c < cols; c += BLOCK) s += expf(xr[c] - m);
    red[t] = s;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) red[t] += red[t + stride];
        __syncthreads();
    }
    const float log_s = logf(red[0]);

    for (int c = t; c < cols; c += BLOCK) yr[c] = (xr[c] - m) - log_s;
}
