// Argmax over the middle dimension of x[B][D][J], out[b][j] = the first d with the largest x[b][d][j].
//
// A block of BX x BY threads takes BX consecutive columns j of one batch b (grid [ceil_div(J, BX), B]); the BY
// threads of a column split its D values: thread row ty reads d = ty, ty + BY, ty + 2·BY, ..., UNROLL loads at
// a time, so each thread has UNROLL independent loads in flight and a warp always reads 32 consecutive floats
// of one row. Each thread keeps its (best value, first index of it); the BY partial results of a column are
// merged in shared memory, a larger value winning and equal values keeping the smaller index, so the result
// is the first index of the maximum whatever BY is.
//
// Tunables (#defines): BX (columns per block, a multiple of 32), BY (threads per column, a power of two),
// UNROLL (loads in flight per thread). Launch: grid [ceil_div(J, BX), B], block [BX, BY].
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

#define NEG_INF __int_as_float(0xff800000)  // -inf (NVRTC has no <math.h> INFINITY)

extern "C" __global__ void __launch_bounds__(BX * BY) argmax_dim1(const float* x, long long* out, int B, int D, int J)
{
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int j = blockIdx.x * BX + tx, b = blockIdx.y;
    float best = NEG_INF;
    int index = 0x7fffffff;  // no element seen: loses every merge against a real one
    if (j < J) {
        const float* col = x + (size_t)b * D * J + j;
        int d = ty;
        for (; d + (UNROLL - 1) * BY < D; d += UNROLL * BY) {
            float v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u] = __ldg(col + (size_t)(d + u * BY) * J);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                if (v[u] > best) {
                    best = v[u];
                    index = d + u * BY;
                }
        }
        for (; d < D; d += BY) {
            const float v = __ldg(col + (size_t)d * J);
            if (v > best) {
                best = v;
                index = d;
            }
        }
    }
#if BY > 1
    __shared__ float sv[BY][BX];
    __shared__ int si[BY][BX];
    sv[ty][tx] = best;
    si[ty][tx] = index;
    __syncthreads();
#pragma unroll
    for (int half = BY / 2; half > 0; half >>= 1) {
        if (ty < half) {
            const float v = sv[ty + half][tx];
            const int i = si[ty + half][tx];
            if (v > best || (v == best && i < index)) {
                best = v;
                index = i;
                sv[ty][tx] = v;
                si[ty][tx] = i;
            }
        }
        __syncthreads();
    }
#endif
    if (ty == 0 && j < J) out[(size_t)b * J + j] = index;
}
