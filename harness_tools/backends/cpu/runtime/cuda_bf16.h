/* cuda_bf16.h for the cpu backend: __nv_bfloat16, __nv_bfloat162 and their intrinsics (cudaopt_cpu_half.h). */
#include "cudaopt_cpu_half.h"
