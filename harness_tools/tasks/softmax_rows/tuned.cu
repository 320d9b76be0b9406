// Row softmax that reads every row from global memory once: 4 bytes read and 4 written per element, the
// least this memory-bound kernel can move. A group of warps owns a row and keeps it in registers (ITEMS
// float4s, 4·ITEMS floats, per thread), so the row max, the sum of exp(x - max) and the output all come
// from registers, and exp is computed once per element. The group is as small as the row allows,
// g = min(WARPS, ceil_div(cols, 128·ITEMS)) warps, and a block of WARPS warps takes WARPS / g rows: one
// warp (or a few) per row and several rows per block for short rows, the whole block for long ones. So
// nearly every register slot holds data whatever cols is: registers fix the occupancy, and empty slots
// would only lower the bytes in flight. The launch's grid, ceil_div(rows, WARPS // g), repeats the
// formula. Loads and stores are float4 when every row starts 16-byte aligned (cols % 4 == 0 and x, y
// aligned, as cuMemAlloc's are), scalar otherwise; each warp access covers 32 consecutive float4s (or
// floats). Rows longer than the block's cache, 128·WARPS·ITEMS floats, are streamed in chunks of that
// size: one pass keeps a running (max, sum) per thread, a second pass (reading the row again, mostly
// from L2) writes it. cols is the same for every row, so a launch takes one path in every block and the
// barriers stay uniform; rows past the end and warps left over when g does not divide WARPS join the
// barriers with no columns (and write nothing).
//
// Tunables (#defines): WARPS warps per block (the most a row gets); ITEMS float4s per thread in the row
// cache; CS 1 for evict-first loads and stores (__ldcs/__stcs: every byte is touched once), 0 for
// read-only-path loads (__ldg) and plain stores.
#ifndef WARPS
#define WARPS 8
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef CS
#define CS 0
#endif
#define VALS (4 * ITEMS)            // floats per thread
#define CACHE (32 * WARPS * VALS)  // the longest row a block keeps in registers
#define NEG_INF (-__int_as_float(0x7f800000))

// Loads whose values are not read again (LAST) may evict first; the streamed path's first pass keeps
// the row in L2 for its second.
template <bool LAST, class T>
__device__ __forceinline__ T load(const T* p)
{
    return LAST && CS ? __ldcs(p) : __ldg(p);
}

template <class T>
__device__ __forceinline__ void store(T* p, T v)
{
    if (CS)
        __stcs(p, v);
    else
        *p = v;
}

// Warp w of a row's group covers one contiguous span of the chunk that starts at column `base` (a
// multiple of 128·ITEMS): float4 path, float4s [32·ITEMS·w, 32·ITEMS·(w + 1)), of which lane l takes
// 32·ITEMS·w + l + 32·i, i < ITEMS, into v[4i .. 4i + 3]; scalar path, floats [128·ITEMS·w, ...), of
// which lane l takes 128·ITEMS·w + l + 32·j into v[j]. Every load and store of a warp covers 32
// consecutive float4s (floats), and the offsets within a thread's span are compile-time constants, so
// one pointer per thread serves all of them. Columns at or past n read as -inf (exp gives 0) and are
// not written. A thread whose whole span is inside the row (all but the last of a row's threads) skips
// the per-item tests: the compiler would otherwise keep one predicate per item alive from the loads to
// the stores, costing registers and so occupancy.
template <bool VEC, bool LAST>
__device__ __forceinline__ void load_chunk(const float* xr, int w, int base, int n, float (&v)[VALS])
{
    const int lane = threadIdx.x % 32;
    if (VEC) {
        const int first = 32 * ITEMS * w + lane;
        const int left = (n - base) / 4 - first;  // float4s from this thread's first; n, base: multiples of 4
        const float4* x4 = reinterpret_cast<const float4*>(xr + base) + first;
        float4 f[ITEMS];
        if (32 * (ITEMS - 1) < left) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) f[i] = load<LAST>(x4 + 32 * i);
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i)
                f[i] = 32 * i < left ? load<LAST>(x4 + 32 * i) : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        }
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            v[4 * i] = f[i].x;
            v[4 * i + 1] = f[i].y;
            v[4 * i + 2] = f[i].z;
            v[4 * i + 3] = f[i].w;
        }
    } else {
        const int first = VALS * 32 * w + lane;
        const int left = n - base - first;
        const float* xs = xr + base + first;
        if (32 * (VALS - 1) < left) {
#pragma unroll
            for (int j = 0; j < VALS; ++j) v[j] = load<LAST>(xs + 32 * j);
        } else {
#pragma unroll
            for (int j = 0; j < VALS; ++j) v[j] = 32 * j < left ? load<LAST>(xs + 32 * j) : NEG_INF;
        }
    }
}

template <bool VEC>
__device__ __forceinline__ void store_chunk(float* yr, int w, int base, int n, const float (&v)[VALS])
{
    const int lane = threadIdx.x % 32;
    if (VEC) {
        const int first = 32 * ITEMS * w + lane;
        const int left = (n - base) / 4 - first;
        float4* y4 = reinterpret_cast<float4*>(yr + base) + first;
        if (32 * (ITEMS - 1) < left) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) store(y4 + 32 * i, make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]));
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i)
                if (32 * i < left) store(y4 + 32 * i, make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]));
        }
    } else {
        const int first = VALS * 32 * w + lane;
        const int left = n - base - first;
        float* ys = yr + base + first;
        if (32 * (VALS - 1) < left) {
#pragma unroll
            for (int j = 0; j < VALS; ++j) store(ys + 32 * j, v[j]);
        } else {
#pragma unroll
            for (int j = 0; j < VALS; ++j)
                if (32 * j < left) store(ys + 32 * j, v[j]);
        }
    }
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Merge (m2, s2) into (m, s); both are (max, sum of exp(x - max)) over disjoint sets of columns.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2)
{
    const float mm = fmaxf(m, m2);
    if (mm == NEG_INF) return;  // both sets empty
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
}

__device__ __forceinline__ void warp_merge(float& m, float& s)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
}

// A row's group: warps [first, first + g) of the block; `mine`: lane `lane` of this warp reads the slot
// of the group's warp number `lane` (false for a left-over warp). Reductions: each warp reduces its
// lanes; with several warps per row, lane 0 of each posts its result to its warp's slot and, after a
// barrier, every warp reduces its group's slots, so all threads end with the row's result. Each
// reduction posts to its own array, so one barrier apiece suffices. g is the same in every warp of the
// block, so all of them reach the barrier or none does.
struct Group {
    int first, g;
    bool mine;
};

// REDUCE is warp_max or warp_sum; `none` is what an empty slot contributes.
template <float (*REDUCE)(float)>
__device__ __forceinline__ float group_reduce(float v, const Group& G, float* posted, float none)
{
    v = REDUCE(v);
    if (WARPS > 1 && G.g > 1) {
        if (threadIdx.x % 32 == 0) posted[threadIdx.x / 32] = v;
        __syncthreads();
        v = REDUCE(G.mine ? posted[G.first + threadIdx.x % 32] : none);
    }
    return v;
}

__device__ __forceinline__ void group_merge(float& m, float& s, const Group& G, float* posted_m, float* posted_s)
{
    warp_merge(m, s);
    if (WARPS > 1 && G.g > 1) {
        if (threadIdx.x % 32 == 0) {
            posted_m[threadIdx.x / 32] = m;
            posted_s[threadIdx.x / 32] = s;
        }
        __syncthreads();
        m = G.mine ? posted_m[G.first + threadIdx.x % 32] : NEG_INF;
        s = G.mine ? posted_s[G.first + threadIdx.x % 32] : 0.0f;
        warp_merge(m, s);
    }
}

// One row of n columns (n is cols, or 0 for a row past the end or a left-over warp); this warp is
// warp w of the row's group. `cols` picks the path, the same in every block.
template <bool VEC>
__device__ __forceinline__ void softmax_row(const float* xr, float* yr, int w, int n, int cols, const Group& G,
                                            float* posted_m, float* posted_s)
{
    float v[VALS];
    if (cols <= 128 * ITEMS * G.g) {  // one read: the row stays in registers
        load_chunk<VEC, true>(xr, w, 0, n, v);
        float m = NEG_INF;
#pragma unroll
        for (int j = 0; j < VALS; ++j) m = fmaxf(m, v[j]);
        m = group_reduce<warp_max>(m, G, posted_m, NEG_INF);
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < VALS; ++j) {
            v[j] = expf(v[j] - m);  // padding: exp(-inf) = 0
            s += v[j];
        }
        const float inv = 1.0f / group_reduce<warp_sum>(s, G, posted_s, 0.0f);
#pragma unroll
        for (int j = 0; j < VALS; ++j) v[j] *= inv;
        store_chunk<VEC>(yr, w, 0, n, v);
    } else {  // streamed, in chunks of CACHE (g == WARPS); the first is full, so m is finite after it
        float m = NEG_INF, s = 0.0f;
        for (int base = 0; base < n; base += CACHE) {
            load_chunk<VEC, false>(xr, w, base, n, v);
            float cm = NEG_INF;
#pragma unroll
            for (int j = 0; j < VALS; ++j) cm = fmaxf(cm, v[j]);
            if (cm > m) {  // rescale the running sum to the new maximum
                s *= expf(m - cm);
                m = cm;
            }
#pragma unroll
            for (int j = 0; j < VALS; ++j) s += expf(v[j] - m);
        }
        group_merge(m, s, G, posted_m, posted_s);
        const float inv = 1.0f / s;
        for (int base = 0; base < n; base += CACHE) {
            load_chunk<VEC, true>(xr, w, base, n, v);
#pragma unroll
            for (int j = 0; j < VALS; ++j) v[j] = expf(v[j] - m) * inv;
            store_chunk<VEC>(yr, w, base, n, v);
        }
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS) softmax_rows(const float* x, float* y, int rows, int cols)
{
    __shared__ float posted_m[WARPS], posted_s[WARPS];
    const int g = min(WARPS, (cols + 128 * ITEMS - 1) / (128 * ITEMS));  // warps per row
    const int per_block = WARPS / g;                                      // rows per block
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int sub = warp / g;  // row within the block; per_block for a left-over warp
    const Group G = {sub * g, g, sub < per_block && lane < g};
    const int row = blockIdx.x * per_block + sub;
    const int n = sub < per_block && row < rows ? cols : 0;
    const size_t offset = (size_t)min(row, rows - 1) * cols;
    const bool vec = cols % 4 == 0 && (((size_t)x | (size_t)y) & 15) == 0;
    if (vec)
        softmax_row<true>(x + offset, y + offset, warp % g, n, cols, G, posted_m, posted_s);
    else
        softmax_row<false>(x + offset, y + offset, warp % g, n, cols, G, posted_m, posted_s);
}
