/* cuda_fp16.h for the cpu backend: __half, __half2 and their intrinsics (cudaopt_cpu_half.h). */
#include "cudaopt_cpu_half.h"
