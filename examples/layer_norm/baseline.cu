// Baseline layer norm: one block of 256 threads per row (one batch element) and three passes over the row:
// the mean, the mean squared deviation from it, then y = (x - mean) / sqrt(var + eps) * weight + bias.
#define BLOCK 256

__device__ float block_sum(float v, float* red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    const float total = red[0];
    __syncthreads();
    return total;
}

extern "C" __global__ void layer_norm(const float* x, const float* weight, const float* bias, float* y,
                                      int rows, int cols, float eps)
{
    __shared__ float red[BLOCK];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) s += xr[c];
    const float mean = block_sum(s, red) / cols;

    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, red) / cols + eps);

    for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = (xr[c] - mean) * rstd * weight[c] + bias[c];
}
