/* cuda_fp8.h for the cpu backend: __nv_fp8_e4m3, __nv_fp8_e5m2, their pairs and quads and the __nv_cvt_* conversions
 * (cudaopt_cpu_fp8.h), with the 16-bit floats as in CUDA. */
#include "cudaopt_cpu_fp8.h"
