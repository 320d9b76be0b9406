// Baseline 2-d convolution (correlation, as in Kernel Tuner's example): one thread per output pixel, 16 x 16
// threads per block, the input read from global memory for every filter tap. The image and filter sizes are
// #defined per case; the filter lies in __constant__ memory (the task copies it there before every launch).
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

__constant__ float d_filter[filter_height * filter_width];

extern "C" __global__ void convolution_naive(float* output, const float* input)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= image_width || y >= image_height) return;
    float sum = 0.0f;
    for (int i = 0; i < filter_height; ++i)
        for (int j = 0; j < filter_width; ++j)
            sum += input[(y + i) * input_width + x + j] * d_filter[i * filter_width + j];
    output[y * image_width + x] = sum;
}
