/* cudaopt_cpu.h — CUDA's device-side API, for running CUDA C++ kernels on the CPU.
 *
 * Force-included (g++ -include) before a candidate's CUDA source, which is then compiled unchanged as
 * C++17 into a shared object run by libcudaopt_cpu (cudaopt_cpu_core.h): a block runs on one OS thread,
 * its CUDA threads are fibers that switch only inside barriers and warp operations, and blocks run in
 * parallel on several OS threads (so atomics are real atomics). Everything a kernel can name is defined
 * here in the global namespace, as in CUDA; helpers live in ::cudaopt::dev. Operations that can fail or
 * block are macros that pass the candidate's __LINE__, so every runtime report names the candidate's line.
 *
 * Sections
 *   1  standard headers               8  min / max
 *   2  compiler identity, qualifiers  9  fast-math, rounding-mode arithmetic, conversions
 *   3  vector types                  10  memory: cache-hinted loads and stores, fences
 *   4  built-in variables            11  atomics
 *   5  bits and integer intrinsics   12  block barriers
 *   6  SIMD-in-a-word intrinsics     13  warp operations
 *   7  math functions                14  time, traps, assert, printf
 */
#ifndef CUDAOPT_CPU_H
#define CUDAOPT_CPU_H

/* ───────────────────────── 1. Standard headers ─────────────────────────
 * All of them come first: several CUDA names below are macros (printf, assert, clock, __noinline__)
 * that would break a standard header included after them. The candidate may include only these again,
 * and their include guards make that a no-op. libstdc++'s <math.h> also puts std's float overloads
 * (sqrt(float) is float, isnan, signbit, ...) in the global namespace, which is where CUDA has them. */
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <float.h>
#include <limits.h>
#include <limits>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <type_traits>

#include "cudaopt_cpu_core.h"

/* ───────────────────────── 2. Compiler identity and qualifiers ───────────────────────── */
// The candidate was written for NVRTC targeting the H200 (sm_90), so it sees what NVRTC 13 defines.
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 900
#define __CUDACC_VER_MAJOR__ 13
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0

// Execution-space and memory-space qualifiers mean nothing to a CPU build.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
// A block runs on one OS thread, so thread-local storage is per block. `thread_local` alone (not
// `static thread_local`) because at block scope it implies static, and `static __shared__` stays legal.
#define __shared__ thread_local
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __builtin_assume(...) ((void)0)
// __restrict__ and __inline__ are GCC keywords already.

/* ───────────────────────── 3. Vector types ─────────────────────────
 * Plain aggregates with CUDA's sizes and alignments (checked below). may_alias because kernels routinely
 * reinterpret_cast buffers of scalars to vector pointers, which GCC's type-based alias analysis would
 * otherwise be free to reorder. CUDA 13 deprecates the 16-byte-aligned long4/longlong4/double4 in favour
 * of explicit _16a/_32a variants; the classic names keep 16-byte alignment and the variants exist too. */
#define CUDAOPT_VEC_ATTR(a) __attribute__((aligned(a), may_alias))
#define CUDAOPT_VECTOR_TYPES(base, T, a1, a2, a3, a4)                                                     \
    struct CUDAOPT_VEC_ATTR(a1) base##1 { T x; };                                                         \
    struct CUDAOPT_VEC_ATTR(a2) base##2 { T x, y; };                                                      \
    struct CUDAOPT_VEC_ATTR(a3) base##3 { T x, y, z; };                                                   \
    struct CUDAOPT_VEC_ATTR(a4) base##4 { T x, y, z, w; };                                                \
    constexpr base##1 make_##base##1(T x) { return base##1{x}; }                                          \
    constexpr base##2 make_##base##2(T x, T y) { return base##2{x, y}; }                                  \
    constexpr base##3 make_##base##3(T x, T y, T z) { return base##3{x, y, z}; }                          \
    constexpr base##4 make_##base##4(T x, T y, T z, T w) { return base##4{x, y, z, w}; }
#define CUDAOPT_VECTOR4_VARIANT(base, T, suffix, a)                                                       \
    struct CUDAOPT_VEC_ATTR(a) base##4##suffix { T x, y, z, w; };                                         \
    constexpr base##4##suffix make_##base##4##suffix(T x, T y, T z, T w) { return base##4##suffix{x, y, z, w}; }

CUDAOPT_VECTOR_TYPES(char, signed char, 1, 2, 1, 4)
CUDAOPT_VECTOR_TYPES(uchar, unsigned char, 1, 2, 1, 4)
CUDAOPT_VECTOR_TYPES(short, short, 2, 4, 2, 8)
CUDAOPT_VECTOR_TYPES(ushort, unsigned short, 2, 4, 2, 8)
CUDAOPT_VECTOR_TYPES(int, int, 4, 8, 4, 16)
CUDAOPT_VECTOR_TYPES(uint, unsigned int, 4, 8, 4, 16)
CUDAOPT_VECTOR_TYPES(long, long, 8, 16, 8, 16)
CUDAOPT_VECTOR_TYPES(ulong, unsigned long, 8, 16, 8, 16)
CUDAOPT_VECTOR_TYPES(longlong, long long, 8, 16, 8, 16)
CUDAOPT_VECTOR_TYPES(ulonglong, unsigned long long, 8, 16, 8, 16)
CUDAOPT_VECTOR_TYPES(float, float, 4, 8, 4, 16)
CUDAOPT_VECTOR_TYPES(double, double, 8, 16, 8, 16)
CUDAOPT_VECTOR4_VARIANT(long, long, _16a, 16)
CUDAOPT_VECTOR4_VARIANT(long, long, _32a, 32)
CUDAOPT_VECTOR4_VARIANT(ulong, unsigned long, _16a, 16)
CUDAOPT_VECTOR4_VARIANT(ulong, unsigned long, _32a, 32)
CUDAOPT_VECTOR4_VARIANT(longlong, long long, _16a, 16)
CUDAOPT_VECTOR4_VARIANT(longlong, long long, _32a, 32)
CUDAOPT_VECTOR4_VARIANT(ulonglong, unsigned long long, _16a, 16)
CUDAOPT_VECTOR4_VARIANT(ulonglong, unsigned long long, _32a, 32)
CUDAOPT_VECTOR4_VARIANT(double, double, _16a, 16)
CUDAOPT_VECTOR4_VARIANT(double, double, _32a, 32)
#undef CUDAOPT_VECTOR_TYPES
#undef CUDAOPT_VECTOR4_VARIANT
#undef CUDAOPT_VEC_ATTR

static_assert(sizeof(char3) == 3 && alignof(char3) == 1 && sizeof(uchar4) == 4 && alignof(uchar4) == 4,
              "byte vectors as in CUDA");
static_assert(sizeof(short3) == 6 && alignof(short4) == 8 && alignof(ushort2) == 4, "short vectors as in CUDA");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4 && alignof(float2) == 8 && alignof(float4) == 16,
              "float vectors as in CUDA");
static_assert(alignof(int2) == 8 && alignof(int4) == 16 && alignof(uint3) == 4, "int vectors as in CUDA");
static_assert(sizeof(double3) == 24 && alignof(double2) == 16 && sizeof(double4) == 32 && alignof(double4) == 16 &&
                  alignof(double4_32a) == 32,
              "double vectors as in CUDA");
static_assert(alignof(longlong2) == 16 && alignof(long2) == 16 && alignof(ulonglong4) == 16, "64-bit vectors as in CUDA");

/* ───────────────────────── 4. Built-in variables ───────────────────────── */
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

namespace cudaopt {
namespace dev {
inline uint3 index3(const rt::Index3& i) { return uint3{i.x, i.y, i.z}; }
}  // namespace dev
}  // namespace cudaopt

// Values, not lvalues: CUDA forbids assigning to them or taking their address too. They read the running
// fiber's context on every use, so nothing is cached across a fiber switch.
#define threadIdx (::cudaopt::dev::index3(::cudaopt::rt::current()->thread_idx))
#define blockIdx (::cudaopt::dev::index3(::cudaopt::rt::current()->block_idx))
#define blockDim (::dim3(::cudaopt::dev::index3(::cudaopt::rt::current()->block_dim)))
#define gridDim (::dim3(::cudaopt::dev::index3(::cudaopt::rt::current()->grid_dim)))
inline constexpr int warpSize = 32;

/* ───────────────────────── 5. Bits and integer intrinsics ───────────────────────── */
constexpr int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
constexpr unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
constexpr float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
constexpr float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
constexpr long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
constexpr double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
constexpr int __double2hiint(double x) { return int(__builtin_bit_cast(unsigned long long, x) >> 32); }
constexpr int __double2loint(double x) { return int(__builtin_bit_cast(unsigned long long, x) & 0xffffffffu); }
constexpr double __hiloint2double(int hi, int lo) {
    return __builtin_bit_cast(double, (static_cast<unsigned long long>(static_cast<unsigned int>(hi)) << 32) |
                                          static_cast<unsigned int>(lo));
}

namespace cudaopt {
namespace dev {
__extension__ typedef __int128 int128;  // GCC's 128-bit integers, for exact high products and conversions
__extension__ typedef unsigned __int128 uint128;
}  // namespace dev
}  // namespace cudaopt

constexpr int __popc(unsigned int x) { return __builtin_popcount(x); }
constexpr int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
constexpr int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
constexpr int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
constexpr int __ffs(int x) { return __builtin_ffs(x); }  // 1-based index of the lowest set bit, 0 for 0
constexpr int __ffsll(long long x) { return __builtin_ffsll(x); }
constexpr unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
constexpr unsigned long long __brevll(unsigned long long x) {
    return (static_cast<unsigned long long>(__brev(static_cast<unsigned int>(x))) << 32) | __brev(static_cast<unsigned int>(x >> 32));
}
constexpr unsigned short __nv_bswap16(unsigned short x) { return __builtin_bswap16(x); }
constexpr unsigned int __nv_bswap32(unsigned int x) { return __builtin_bswap32(x); }
constexpr unsigned long long __nv_bswap64(unsigned long long x) { return __builtin_bswap64(x); }

// Byte n of the result is byte ((s >> 4n) & 7) of the eight bytes y:x (x holds bytes 0-3).
constexpr unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= static_cast<unsigned int>((bytes >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return r;
}
// Funnel shifts of the 64-bit hi:lo; plain forms take the shift mod 32, the _c forms clamp it to 32.
constexpr unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned int>((((static_cast<unsigned long long>(hi) << 32) | lo) << (shift & 31u)) >> 32);
}
constexpr unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned int>((((static_cast<unsigned long long>(hi) << 32) | lo) << (shift < 32u ? shift : 32u)) >> 32);
}
constexpr unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned int>(((static_cast<unsigned long long>(hi) << 32) | lo) >> (shift & 31u));
}
constexpr unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
    return static_cast<unsigned int>(((static_cast<unsigned long long>(hi) << 32) | lo) >> (shift < 32u ? shift : 32u));
}

constexpr int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
constexpr unsigned int __umulhi(unsigned int x, unsigned int y) {
    return static_cast<unsigned int>((static_cast<unsigned long long>(x) * y) >> 32);
}
constexpr long long __mul64hi(long long x, long long y) { return static_cast<long long>((static_cast<::cudaopt::dev::int128>(x) * y) >> 64); }
constexpr unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return static_cast<unsigned long long>((static_cast<::cudaopt::dev::uint128>(x) * y) >> 64);
}
// 24-bit multiplies: the low 24 bits of each operand (sign-extended for __mul24), low 32 bits of the product.
namespace cudaopt {
namespace dev {
constexpr long long sext24(int v) { return static_cast<int>(static_cast<unsigned int>(v) << 8) >> 8; }
}  // namespace dev
}  // namespace cudaopt
constexpr int __mul24(int x, int y) {
    return static_cast<int>(static_cast<unsigned int>(::cudaopt::dev::sext24(x) * ::cudaopt::dev::sext24(y)));
}
constexpr unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
constexpr unsigned int __sad(int x, int y, unsigned int z) {
    return (x > y ? static_cast<unsigned int>(x) - static_cast<unsigned int>(y) : static_cast<unsigned int>(y) - static_cast<unsigned int>(x)) + z;
}
constexpr unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
// Averages without overflow in the intermediate sum; >> on a negative sum rounds towards -infinity as on the GPU.
constexpr int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
constexpr int __rhadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1); }
constexpr unsigned int __uhadd(unsigned int x, unsigned int y) { return static_cast<unsigned int>((static_cast<unsigned long long>(x) + y) >> 1); }
constexpr unsigned int __urhadd(unsigned int x, unsigned int y) {
    return static_cast<unsigned int>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}

// Position of the offset-th set bit of mask counting from bit base (upwards for offset > 0, downwards for
// offset < 0; offset 0 asks whether base itself is set); 0xffffffff when there is none.
constexpr unsigned int __fns(unsigned int mask, unsigned int base, int offset) {
    if (base > 31u) return 0xffffffffu;
    if (offset == 0) return ((mask >> base) & 1u) ? base : 0xffffffffu;
    const int step = offset > 0 ? 1 : -1;
    int remaining = offset > 0 ? offset : -offset;
    for (int pos = static_cast<int>(base); pos >= 0 && pos < 32; pos += step)
        if (((mask >> pos) & 1u) && --remaining == 0) return static_cast<unsigned int>(pos);
    return 0xffffffffu;
}

// Dot products of packed 8-bit (and 16-bit) lanes with a 32-bit accumulator; the sum wraps like the hardware.
namespace cudaopt {
namespace dev {
template <bool Signed>
constexpr long long lane8(unsigned int v, int n) {
    const unsigned int b = (v >> (8 * n)) & 0xffu;
    return Signed ? static_cast<signed char>(b) : static_cast<long long>(b);
}
template <bool Signed>
constexpr long long lane16(unsigned int v, int n) {
    const unsigned int h = (v >> (16 * n)) & 0xffffu;
    return Signed ? static_cast<short>(h) : static_cast<long long>(h);
}
template <bool Signed>
constexpr unsigned int dp4a(unsigned int a, unsigned int b, unsigned int c) {
    long long sum = c;
    for (int n = 0; n < 4; ++n) sum += lane8<Signed>(a, n) * lane8<Signed>(b, n);
    return static_cast<unsigned int>(sum);
}
template <bool Signed>
constexpr unsigned int dp2a(unsigned int a, unsigned int b, unsigned int c, int first_byte) {
    return static_cast<unsigned int>(c + lane16<Signed>(a, 0) * lane8<Signed>(b, first_byte) +
                                     lane16<Signed>(a, 1) * lane8<Signed>(b, first_byte + 1));
}
constexpr unsigned int pack(char4 v) {
    return static_cast<unsigned char>(v.x) | static_cast<unsigned int>(static_cast<unsigned char>(v.y)) << 8 |
           static_cast<unsigned int>(static_cast<unsigned char>(v.z)) << 16 | static_cast<unsigned int>(static_cast<unsigned char>(v.w)) << 24;
}
constexpr unsigned int pack(uchar4 v) { return v.x | static_cast<unsigned int>(v.y) << 8 | static_cast<unsigned int>(v.z) << 16 | static_cast<unsigned int>(v.w) << 24; }
constexpr unsigned int pack(short2 v) { return static_cast<unsigned short>(v.x) | static_cast<unsigned int>(static_cast<unsigned short>(v.y)) << 16; }
constexpr unsigned int pack(ushort2 v) { return v.x | static_cast<unsigned int>(v.y) << 16; }
}  // namespace dev
}  // namespace cudaopt

constexpr int __dp4a(int a, int b, int c) {
    return static_cast<int>(::cudaopt::dev::dp4a<true>(static_cast<unsigned int>(a), static_cast<unsigned int>(b), static_cast<unsigned int>(c)));
}
constexpr unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) { return ::cudaopt::dev::dp4a<false>(a, b, c); }
constexpr int __dp4a(char4 a, char4 b, int c) {
    return static_cast<int>(::cudaopt::dev::dp4a<true>(::cudaopt::dev::pack(a), ::cudaopt::dev::pack(b), static_cast<unsigned int>(c)));
}
constexpr unsigned int __dp4a(uchar4 a, uchar4 b, unsigned int c) { return ::cudaopt::dev::dp4a<false>(::cudaopt::dev::pack(a), ::cudaopt::dev::pack(b), c); }
#define CUDAOPT_DP2A(name, first_byte)                                                                                      \
    constexpr int name(int a, int b, int c) {                                                                               \
        return static_cast<int>(::cudaopt::dev::dp2a<true>(static_cast<unsigned int>(a), static_cast<unsigned int>(b),      \
                                                           static_cast<unsigned int>(c), first_byte));                      \
    }                                                                                                                       \
    constexpr unsigned int name(unsigned int a, unsigned int b, unsigned int c) { return ::cudaopt::dev::dp2a<false>(a, b, c, first_byte); } \
    constexpr int name(short2 a, char4 b, int c) {                                                                          \
        return static_cast<int>(::cudaopt::dev::dp2a<true>(::cudaopt::dev::pack(a), ::cudaopt::dev::pack(b), static_cast<unsigned int>(c), first_byte)); \
    }                                                                                                                       \
    constexpr unsigned int name(ushort2 a, uchar4 b, unsigned int c) {                                                      \
        return ::cudaopt::dev::dp2a<false>(::cudaopt::dev::pack(a), ::cudaopt::dev::pack(b), c, first_byte);               \
    }
CUDAOPT_DP2A(__dp2a_lo, 0)
CUDAOPT_DP2A(__dp2a_hi, 2)
#undef CUDAOPT_DP2A

// sm_90 DPX integer min/max (32-bit forms; the 16x2 forms are not provided).
constexpr int __vimax_s32_relu(int a, int b) { return a > b ? (a > 0 ? a : 0) : (b > 0 ? b : 0); }
constexpr int __vimin_s32_relu(int a, int b) { return (a < b ? a : b) > 0 ? (a < b ? a : b) : 0; }
constexpr int __vimax3_s32(int a, int b, int c) { return (a > b ? a : b) > c ? (a > b ? a : b) : c; }
constexpr unsigned int __vimax3_u32(unsigned int a, unsigned int b, unsigned int c) { return (a > b ? a : b) > c ? (a > b ? a : b) : c; }
constexpr int __vimin3_s32(int a, int b, int c) { return (a < b ? a : b) < c ? (a < b ? a : b) : c; }
constexpr unsigned int __vimin3_u32(unsigned int a, unsigned int b, unsigned int c) { return (a < b ? a : b) < c ? (a < b ? a : b) : c; }
constexpr int __vimax3_s32_relu(int a, int b, int c) { return __vimax3_s32(a, b, c) > 0 ? __vimax3_s32(a, b, c) : 0; }
constexpr int __vimin3_s32_relu(int a, int b, int c) { return __vimin3_s32(a, b, c) > 0 ? __vimin3_s32(a, b, c) : 0; }
constexpr int __viaddmax_s32(int a, int b, int c) {
    return static_cast<int>(static_cast<unsigned int>(a) + static_cast<unsigned int>(b)) > c ? static_cast<int>(static_cast<unsigned int>(a) + static_cast<unsigned int>(b)) : c;
}
constexpr int __viaddmin_s32(int a, int b, int c) {
    return static_cast<int>(static_cast<unsigned int>(a) + static_cast<unsigned int>(b)) < c ? static_cast<int>(static_cast<unsigned int>(a) + static_cast<unsigned int>(b)) : c;
}
constexpr unsigned int __viaddmax_u32(unsigned int a, unsigned int b, unsigned int c) { return a + b > c ? a + b : c; }
constexpr unsigned int __viaddmin_u32(unsigned int a, unsigned int b, unsigned int c) { return a + b < c ? a + b : c; }
constexpr int __viaddmax_s32_relu(int a, int b, int c) { return __viaddmax_s32(a, b, c) > 0 ? __viaddmax_s32(a, b, c) : 0; }
constexpr int __viaddmin_s32_relu(int a, int b, int c) { return __viaddmin_s32(a, b, c) > 0 ? __viaddmin_s32(a, b, c) : 0; }
inline int __vibmax_s32(int a, int b, bool* pred) { *pred = a >= b; return a >= b ? a : b; }
inline unsigned int __vibmax_u32(unsigned int a, unsigned int b, bool* pred) { *pred = a >= b; return a >= b ? a : b; }
inline int __vibmin_s32(int a, int b, bool* pred) { *pred = a <= b; return a <= b ? a : b; }
inline unsigned int __vibmin_u32(unsigned int a, unsigned int b, bool* pred) { *pred = a <= b; return a <= b ? a : b; }

/* ───────────────────────── 6. SIMD-in-a-word intrinsics (__v*2: two 16-bit lanes, __v*4: four bytes) ───────────────────────── */
namespace cudaopt {
namespace dev {
struct SimdLimits {
    int smin, smax, umax;
};
// Applies op to each lane of a and b (read as signed or unsigned), keeping the low bits of each result.
template <int Bits, bool Signed, class Op>
inline unsigned int simd(unsigned int a, unsigned int b, Op op) {
    constexpr unsigned int lane_mask = (1u << Bits) - 1u;
    constexpr SimdLimits limits{-(1 << (Bits - 1)), (1 << (Bits - 1)) - 1, static_cast<int>(lane_mask)};
    unsigned int r = 0;
    for (int s = 0; s < 32; s += Bits) {
        const unsigned int ua = (a >> s) & lane_mask, ub = (b >> s) & lane_mask;
        const int x = Signed ? static_cast<int>(ua << (32 - Bits)) >> (32 - Bits) : static_cast<int>(ua);
        const int y = Signed ? static_cast<int>(ub << (32 - Bits)) >> (32 - Bits) : static_cast<int>(ub);
        r |= (static_cast<unsigned int>(op(x, y, limits)) & lane_mask) << s;
    }
    return r;
}
constexpr int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
// Rounded signed average as the hardware does it: halves round away from zero.
constexpr int avg_away(int x, int y) { return x + y < 0 ? (x + y) >> 1 : (x + y + 1) >> 1; }
template <int Bits, bool Signed>
inline unsigned int sum_abs_diff(unsigned int a, unsigned int b) {
    unsigned int sum = 0;
    simd<Bits, Signed>(a, b, [&sum](int x, int y, SimdLimits) { sum += static_cast<unsigned int>(x > y ? x - y : y - x); return 0; });
    return sum;
}
}  // namespace dev
}  // namespace cudaopt

#define CUDAOPT_SIMD2(name, sgn, expr)                                                                         \
    inline unsigned int name##2(unsigned int a, unsigned int b) {                                              \
        return ::cudaopt::dev::simd<16, sgn>(a, b, [](int x, int y, ::cudaopt::dev::SimdLimits L) {           \
            (void)x, (void)y, (void)L;                                                                         \
            return (expr);                                                                                     \
        });                                                                                                    \
    }                                                                                                          \
    inline unsigned int name##4(unsigned int a, unsigned int b) {                                              \
        return ::cudaopt::dev::simd<8, sgn>(a, b, [](int x, int y, ::cudaopt::dev::SimdLimits L) {             \
            (void)x, (void)y, (void)L;                                                                         \
            return (expr);                                                                                     \
        });                                                                                                    \
    }
#define CUDAOPT_SIMD1(name, sgn, expr)                                                                         \
    inline unsigned int name##2(unsigned int a) {                                                              \
        return ::cudaopt::dev::simd<16, sgn>(a, 0u, [](int x, int, ::cudaopt::dev::SimdLimits L) {             \
            (void)x, (void)L;                                                                                  \
            return (expr);                                                                                     \
        });                                                                                                    \
    }                                                                                                          \
    inline unsigned int name##4(unsigned int a) {                                                              \
        return ::cudaopt::dev::simd<8, sgn>(a, 0u, [](int x, int, ::cudaopt::dev::SimdLimits L) {              \
            (void)x, (void)L;                                                                                  \
            return (expr);                                                                                     \
        });                                                                                                    \
    }
CUDAOPT_SIMD1(__vabs, true, x < 0 ? -x : x)
CUDAOPT_SIMD1(__vabsss, true, ::cudaopt::dev::clamp(x < 0 ? -x : x, L.smin, L.smax))
CUDAOPT_SIMD1(__vneg, true, -x)
CUDAOPT_SIMD1(__vnegss, true, ::cudaopt::dev::clamp(-x, L.smin, L.smax))
CUDAOPT_SIMD2(__vadd, false, x + y)
CUDAOPT_SIMD2(__vaddss, true, ::cudaopt::dev::clamp(x + y, L.smin, L.smax))
CUDAOPT_SIMD2(__vaddus, false, ::cudaopt::dev::clamp(x + y, 0, L.umax))
CUDAOPT_SIMD2(__vsub, false, x - y)
CUDAOPT_SIMD2(__vsubss, true, ::cudaopt::dev::clamp(x - y, L.smin, L.smax))
CUDAOPT_SIMD2(__vsubus, false, ::cudaopt::dev::clamp(x - y, 0, L.umax))
CUDAOPT_SIMD2(__vavgs, true, ::cudaopt::dev::avg_away(x, y))
CUDAOPT_SIMD2(__vavgu, false, (x + y + 1) >> 1)
CUDAOPT_SIMD2(__vhaddu, false, (x + y) >> 1)
CUDAOPT_SIMD2(__vabsdiffs, true, x > y ? x - y : y - x)
CUDAOPT_SIMD2(__vabsdiffu, false, x > y ? x - y : y - x)
CUDAOPT_SIMD2(__vmaxs, true, x > y ? x : y)
CUDAOPT_SIMD2(__vmaxu, false, x > y ? x : y)
CUDAOPT_SIMD2(__vmins, true, x < y ? x : y)
CUDAOPT_SIMD2(__vminu, false, x < y ? x : y)
// Comparisons: __vcmp* give an all-ones lane for true, __vset* give 1.
CUDAOPT_SIMD2(__vcmpeq, false, x == y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpne, false, x != y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpges, true, x >= y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpgeu, false, x >= y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpgts, true, x > y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpgtu, false, x > y ? -1 : 0)
CUDAOPT_SIMD2(__vcmples, true, x <= y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpleu, false, x <= y ? -1 : 0)
CUDAOPT_SIMD2(__vcmplts, true, x < y ? -1 : 0)
CUDAOPT_SIMD2(__vcmpltu, false, x < y ? -1 : 0)
CUDAOPT_SIMD2(__vseteq, false, x == y)
CUDAOPT_SIMD2(__vsetne, false, x != y)
CUDAOPT_SIMD2(__vsetges, true, x >= y)
CUDAOPT_SIMD2(__vsetgeu, false, x >= y)
CUDAOPT_SIMD2(__vsetgts, true, x > y)
CUDAOPT_SIMD2(__vsetgtu, false, x > y)
CUDAOPT_SIMD2(__vsetles, true, x <= y)
CUDAOPT_SIMD2(__vsetleu, false, x <= y)
CUDAOPT_SIMD2(__vsetlts, true, x < y)
CUDAOPT_SIMD2(__vsetltu, false, x < y)
#undef CUDAOPT_SIMD1
#undef CUDAOPT_SIMD2
inline unsigned int __vsads2(unsigned int a, unsigned int b) { return ::cudaopt::dev::sum_abs_diff<16, true>(a, b); }
inline unsigned int __vsadu2(unsigned int a, unsigned int b) { return ::cudaopt::dev::sum_abs_diff<16, false>(a, b); }
inline unsigned int __vsads4(unsigned int a, unsigned int b) { return ::cudaopt::dev::sum_abs_diff<8, true>(a, b); }
inline unsigned int __vsadu4(unsigned int a, unsigned int b) { return ::cudaopt::dev::sum_abs_diff<8, false>(a, b); }

/* ───────────────────────── 7. Math functions ─────────────────────────
 * The C library and libstdc++ already give CUDA's set: expf, sqrt(float), isnan, ... in the global
 * namespace (and exp10f, sincosf as GNU extensions). Defined here: CUDA's additions. They are noexcept so
 * that a newer C library declaring the same C23 name (rsqrt, sinpi, ...) gets its declaration matched. */
namespace cudaopt {
namespace dev {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

// sin(pi x) and cos(pi x), exact at integers and half-integers: x = k/2 + t with |t| <= 1/4 (exact).
inline double sinpi(double x, bool cosine) {
    if (!std::isfinite(x)) return x - x;
    if (std::fabs(x) >= 4503599627370496.0) {  // 2^52: x is an integer
        if (!cosine) return std::copysign(0.0, x);
        return std::fmod(x, 2.0) == 0.0 ? 1.0 : -1.0;
    }
    const double k = std::nearbyint(2.0 * x);
    const double t = x - 0.5 * k;
    const int quadrant = static_cast<int>(static_cast<long long>(k) & 3) + (cosine ? 1 : 0);
    const double s = std::sin(kPi * t), c = std::cos(kPi * t);
    double r = 0.0;
    switch (quadrant & 3) {
        case 0: r = s; break;
        case 1: r = c; break;
        case 2: r = -s; break;
        default: r = -c; break;
    }
    if (r == 0.0) return cosine ? 0.0 : std::copysign(0.0, x);  // sinpi(-n) = -0, cospi(n + 1/2) = +0
    return r;
}

// Halley's method for erf(y) = v (tail == false, |v| <= 1/2) or erfc(y) = v (tail == true, 0 < v <= 1/2),
// started from Winitzki's closed-form approximation; erfc in the tails avoids erf's cancellation near 1.
inline double erf_solve(double v, bool tail) {
    const double a = 0.147;
    const double log1mx2 = tail ? std::log(v) + std::log(2.0 - v) : std::log1p(-v * v);  // ln(1 - x^2)
    const double t = 2.0 / (kPi * a) + 0.5 * log1mx2;
    double y = std::sqrt(std::sqrt(t * t - log1mx2 / a) - t);
    if (!tail && v < 0) y = -y;
    for (int i = 0; i < 6; ++i) {
        const double f = tail ? std::erfc(y) - v : std::erf(y) - v;
        const double df = (tail ? -kTwoOverSqrtPi : kTwoOverSqrtPi) * std::exp(-y * y);
        const double step = f / (df + y * f);  // f'' = -2 y f' for both
        if (!std::isfinite(step)) break;
        y -= step;
        if (std::fabs(step) <= 1e-17 * std::fabs(y)) break;
    }
    return y;
}
inline double erfinv(double x) {
    if (std::isnan(x) || x < -1.0 || x > 1.0) return kNaN;
    if (x == 1.0 || x == -1.0) return std::copysign(kInf, x);
    if (std::fabs(x) <= 0.5) return x == 0.0 ? x : erf_solve(x, false);
    const double y = erf_solve(1.0 - std::fabs(x), true);  // 1 - |x| is exact here
    return x < 0 ? -y : y;
}
inline double erfcinv(double z) {
    if (std::isnan(z) || z < 0.0 || z > 2.0) return kNaN;
    if (z == 0.0) return kInf;
    if (z == 2.0) return -kInf;
    if (z >= 0.5 && z <= 1.5) return erfinv(1.0 - z);  // exact subtraction
    return z < 1.0 ? erf_solve(z, true) : -erf_solve(2.0 - z, true);
}
// exp(x^2) erfc(x): direct with x^2 split into exact parts below 26, asymptotic series above.
inline double erfcx(double x) {
    if (std::isnan(x)) return x;
    if (x < 26.0) {
        const double xx = x * x, err = std::fma(x, x, -xx);
        return std::exp(xx) * (1.0 + err) * std::erfc(x);
    }
    const double inv2x2 = 1.0 / (2.0 * x * x);
    double term = 1.0, sum = 1.0;
    for (int k = 1; k <= 8; ++k) {
        term *= -(2.0 * k - 1.0) * inv2x2;
        sum += term;
    }
    return sum / (x * 1.77245385090551602730);  // sqrt(pi)
}
// Modified Bessel functions of the first kind by their power series (all terms positive).
inline double bessel_i(double x, int order) {
    if (std::isnan(x)) return x;
    const double q = 0.25 * x * x;
    double term = order == 0 ? 1.0 : 0.5 * x, sum = term;
    for (int k = 1; k < 4000; ++k) {
        term *= q / (static_cast<double>(k) * (k + order));
        sum += term;
        if (std::fabs(term) <= 1e-17 * std::fabs(sum) || !std::isfinite(sum)) break;
    }
    return sum;
}
// Euclidean norm of n values, scaled so that squares neither overflow nor underflow; inf wins over NaN.
template <class T>
inline double norm(int n, const T* v) {
    double m = 0.0;
    bool nan = false;
    for (int i = 0; i < n; ++i) {
        const double a = std::fabs(static_cast<double>(v[i]));
        if (std::isinf(a)) return kInf;
        if (std::isnan(a)) nan = true;
        else if (a > m) m = a;
    }
    if (nan) return kNaN;
    if (m == 0.0) return 0.0;
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        const double t = static_cast<double>(v[i]) / m;
        s += t * t;
    }
    return m * std::sqrt(s);
}
}  // namespace dev
}  // namespace cudaopt

inline float rsqrtf(float x) noexcept { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }
inline double rsqrt(double x) noexcept { return 1.0 / std::sqrt(x); }
inline float rsqrt(float x) noexcept { return rsqrtf(x); }
inline float rcbrtf(float x) noexcept { return static_cast<float>(1.0 / std::cbrt(static_cast<double>(x))); }
inline double rcbrt(double x) noexcept { return 1.0 / std::cbrt(x); }
inline float rcbrt(float x) noexcept { return rcbrtf(x); }
inline float rhypotf(float x, float y) noexcept { return static_cast<float>(1.0 / std::hypot(static_cast<double>(x), static_cast<double>(y))); }
inline double rhypot(double x, double y) noexcept { return 1.0 / std::hypot(x, y); }
inline float sinpif(float x) noexcept { return static_cast<float>(::cudaopt::dev::sinpi(x, false)); }
inline float cospif(float x) noexcept { return static_cast<float>(::cudaopt::dev::sinpi(x, true)); }
inline double sinpi(double x) noexcept { return ::cudaopt::dev::sinpi(x, false); }
inline double cospi(double x) noexcept { return ::cudaopt::dev::sinpi(x, true); }
inline float sinpi(float x) noexcept { return sinpif(x); }
inline float cospi(float x) noexcept { return cospif(x); }
inline void sincospif(float x, float* s, float* c) noexcept { *s = sinpif(x), *c = cospif(x); }
inline void sincospi(double x, double* s, double* c) noexcept { *s = sinpi(x), *c = cospi(x); }
inline void sincospi(float x, float* s, float* c) noexcept { sincospif(x, s, c); }
inline void sincos(float x, float* s, float* c) noexcept { ::sincosf(x, s, c); }
inline float exp10(float x) noexcept { return ::exp10f(x); }
inline float erfinvf(float x) noexcept { return static_cast<float>(::cudaopt::dev::erfinv(x)); }
inline float erfcinvf(float x) noexcept { return static_cast<float>(::cudaopt::dev::erfcinv(x)); }
inline float erfcxf(float x) noexcept { return static_cast<float>(::cudaopt::dev::erfcx(x)); }
inline double erfinv(double x) noexcept { return ::cudaopt::dev::erfinv(x); }
inline double erfcinv(double x) noexcept { return ::cudaopt::dev::erfcinv(x); }
inline double erfcx(double x) noexcept { return ::cudaopt::dev::erfcx(x); }
inline float erfinv(float x) noexcept { return erfinvf(x); }
inline float erfcinv(float x) noexcept { return erfcinvf(x); }
inline float erfcx(float x) noexcept { return erfcxf(x); }
inline double normcdf(double x) noexcept { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
inline double normcdfinv(double p) noexcept { return -1.41421356237309504880 * ::cudaopt::dev::erfcinv(2.0 * p); }
inline float normcdff(float x) noexcept { return static_cast<float>(normcdf(x)); }
inline float normcdfinvf(float p) noexcept { return static_cast<float>(normcdfinv(p)); }
inline float normcdf(float x) noexcept { return normcdff(x); }
inline float normcdfinv(float p) noexcept { return normcdfinvf(p); }
inline double cyl_bessel_i0(double x) noexcept { return ::cudaopt::dev::bessel_i(x, 0); }
inline double cyl_bessel_i1(double x) noexcept { return ::cudaopt::dev::bessel_i(x, 1); }
inline float cyl_bessel_i0f(float x) noexcept { return static_cast<float>(cyl_bessel_i0(x)); }
inline float cyl_bessel_i1f(float x) noexcept { return static_cast<float>(cyl_bessel_i1(x)); }
inline double norm(int n, const double* v) noexcept { return ::cudaopt::dev::norm(n, v); }
inline double rnorm(int n, const double* v) noexcept { return 1.0 / ::cudaopt::dev::norm(n, v); }
inline float normf(int n, const float* v) noexcept { return static_cast<float>(::cudaopt::dev::norm(n, v)); }
inline float rnormf(int n, const float* v) noexcept { return static_cast<float>(1.0 / ::cudaopt::dev::norm(n, v)); }
inline double norm3d(double a, double b, double c) noexcept { return std::hypot(a, b, c); }
inline double rnorm3d(double a, double b, double c) noexcept { return 1.0 / std::hypot(a, b, c); }
inline double norm4d(double a, double b, double c, double d) noexcept { const double v[4] = {a, b, c, d}; return ::cudaopt::dev::norm(4, v); }
inline double rnorm4d(double a, double b, double c, double d) noexcept { return 1.0 / norm4d(a, b, c, d); }
inline float norm3df(float a, float b, float c) noexcept { return static_cast<float>(norm3d(a, b, c)); }
inline float rnorm3df(float a, float b, float c) noexcept { return static_cast<float>(rnorm3d(a, b, c)); }
inline float norm4df(float a, float b, float c, float d) noexcept { return static_cast<float>(norm4d(a, b, c, d)); }
inline float rnorm4df(float a, float b, float c, float d) noexcept { return static_cast<float>(rnorm4d(a, b, c, d)); }
inline float j0(float x) noexcept { return ::j0f(x); }
inline float j1(float x) noexcept { return ::j1f(x); }
inline float y0(float x) noexcept { return ::y0f(x); }
inline float y1(float x) noexcept { return ::y1f(x); }
inline float fdividef(float x, float y) noexcept { return x / y; }
inline double fdivide(double x, double y) noexcept { return x / y; }

/* ───────────────────────── 8. min / max ─────────────────────────
 * CUDA's same-type overloads, with fminf/fmaxf semantics for floating point (a NaN loses). Mixed
 * arithmetic operands go through one template with C++'s usual conversions, which is what CUDA's mixed
 * overloads do (min(int, unsigned) is unsigned) and also covers mixes CUDA rejects as ambiguous, such as
 * max(size_t, int). Being a template, it never clashes with a candidate's own non-template helper. */
#define CUDAOPT_MINMAX(T)                                        \
    constexpr T min(T a, T b) { return b < a ? b : a; }          \
    constexpr T max(T a, T b) { return a < b ? b : a; }
CUDAOPT_MINMAX(int)
CUDAOPT_MINMAX(unsigned int)
CUDAOPT_MINMAX(long)
CUDAOPT_MINMAX(unsigned long)
CUDAOPT_MINMAX(long long)
CUDAOPT_MINMAX(unsigned long long)
#undef CUDAOPT_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

namespace cudaopt {
namespace dev {
template <class A, class B>
using MixedArithmetic = std::enable_if_t<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value && !std::is_same<A, B>::value,
                                         decltype(A() + B())>;
}  // namespace dev
}  // namespace cudaopt
template <class A, class B>
inline ::cudaopt::dev::MixedArithmetic<A, B> min(A a, B b) {
    using R = decltype(a + b);
    return ::min(static_cast<R>(a), static_cast<R>(b));
}
template <class A, class B>
inline ::cudaopt::dev::MixedArithmetic<A, B> max(A a, B b) {
    using R = decltype(a + b);
    return ::max(static_cast<R>(a), static_cast<R>(b));
}
constexpr unsigned int umin(unsigned int a, unsigned int b) { return ::min(a, b); }
constexpr unsigned int umax(unsigned int a, unsigned int b) { return ::max(a, b); }
constexpr long long llmin(long long a, long long b) { return ::min(a, b); }
constexpr long long llmax(long long a, long long b) { return ::max(a, b); }
constexpr unsigned long long ullmin(unsigned long long a, unsigned long long b) { return ::min(a, b); }
constexpr unsigned long long ullmax(unsigned long long a, unsigned long long b) { return ::max(a, b); }

/* ───────────────────────── 9. Fast-math intrinsics, rounding modes, conversions ─────────────────────────
 * The GPU's approximate __expf & co. are computed accurately here (the GPU's results are within the
 * documented error of these). Directed rounding (_rz/_ru/_rd) is exact: the round-to-nearest result is
 * stepped by one ulp according to the sign of the exact residual, which error-free transformations in a
 * wider type give (double for float, binary128 for double), so no floating-point environment is touched. */
namespace cudaopt {
namespace dev {
enum class Round { nearest, zero, up, down };

template <class F>
constexpr int sign_of(F v) { return (v > F(0)) - (v < F(0)); }  // 0 for NaN

// r: the round-to-nearest result; residual: sign of (exact - r).
template <class F>
inline F round_directed(F r, int residual, Round mode) {
    const F inf = std::numeric_limits<F>::infinity();
    switch (mode) {
        case Round::up: return residual > 0 ? std::nextafter(r, inf) : r;
        case Round::down: return residual < 0 ? std::nextafter(r, -inf) : r;
        case Round::zero: return (r > 0 && residual < 0) || (r < 0 && residual > 0) ? std::nextafter(r, F(0)) : r;
        default: return r;
    }
}
// An exact zero sum of two terms is -0 when rounding down, unless both terms are +0 (IEEE 754).
template <class F>
inline F zero_sum_sign(F r, int residual, Round mode, bool both_terms_plus_zero) {
    return mode == Round::down && r == 0 && residual == 0 && !both_terms_plus_zero ? -F(0) : r;
}
template <class F>
inline bool plus_zero(F v) { return v == 0 && !std::signbit(v); }
// Wider type in which sums and products of two F are handled exactly (binary128 for double).
template <class F>
using Wide = std::conditional_t<std::is_same<F, float>::value, double, __float128>;
// Sign of (p + q - r) for the F result r, exactly: Knuth's TwoSum gives p + q = s + e, s - r is exact
// (Sterbenz, or r == 0, or an infinity when r overflowed), and a rounded sum of two W's is zero only when
// the exact sum is. Done in W so that no intermediate overflows where F's would.
template <class W, class F>
inline int sum_residual(W p, W q, F r) {
    const W s = p + q, qq = s - p;
    const W e = (p - (s - qq)) + (q - qq);
    return sign_of((s - static_cast<W>(r)) + e);
}
template <class F>
inline F add(F x, F y, Round mode) {
    const F r = x + y;
    const int residual = sum_residual(static_cast<Wide<F>>(x), static_cast<Wide<F>>(y), r);
    return zero_sum_sign(round_directed(r, residual, mode), residual, mode, plus_zero(x) && plus_zero(y));
}
template <class F>
inline F mul(F x, F y, Round mode) {
    const F r = x * y;
    const Wide<F> exact = static_cast<Wide<F>>(x) * static_cast<Wide<F>>(y);
    return round_directed(r, (exact > r) - (exact < r), mode);
}
template <class F>
inline F fma(F x, F y, F z, Round mode) {
    using W = Wide<F>;
    const F r = std::fma(x, y, z);
    const int residual = sum_residual(static_cast<W>(x) * static_cast<W>(y), static_cast<W>(z), r);  // the product is exact in W
    const bool product_plus_zero = (x == 0 || y == 0) && std::signbit(x) == std::signbit(y);
    return zero_sum_sign(round_directed(r, residual, mode), residual, mode, product_plus_zero && plus_zero(z));
}
template <class F>
inline F div(F x, F y, Round mode) {
    using W = Wide<F>;
    const F r = x / y;
    int residual = 0;  // sign(x/y - r) = sign(x - r*y) * sign(y); division by zero is exact
    if (y != 0) residual = sign_of(static_cast<W>(x) - static_cast<W>(r) * static_cast<W>(y)) * sign_of(y);
    return round_directed(r, residual, mode);
}
template <class F>
inline F sqrt(F x, Round mode) {
    using W = Wide<F>;
    const F r = std::sqrt(x);
    return round_directed(r, sign_of(static_cast<W>(x) - static_cast<W>(r) * static_cast<W>(r)), mode);
}
// Floating point to integer as the GPU converts: NaN gives 0, out-of-range values saturate.
template <class I, class F>
inline I to_int(F v, Round mode) {
    switch (mode) {
        case Round::zero: v = std::trunc(v); break;
        case Round::up: v = std::ceil(v); break;
        case Round::down: v = std::floor(v); break;
        default: v = std::nearbyint(v); break;  // ties to even
    }
    if (v != v) return 0;
    if (v <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (v >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return static_cast<I>(v);
}
template <class F, class I>
inline F from_int(I v, Round mode) {
    const F r = static_cast<F>(v);
    const int128 back = static_cast<int128>(r), exact = v;  // r is integral and below 2^65
    return round_directed(r, (exact > back) - (exact < back), mode);
}
inline float narrow(double v, Round mode) {
    const float r = static_cast<float>(v);
    return round_directed(r, (v > r) - (v < r), mode);
}
}  // namespace dev
}  // namespace cudaopt

// glibc declares some of these names (__expf, __sinf, ...) without defining them; these inline
// definitions complete those declarations.
inline float __expf(float x) noexcept { return std::exp(x); }
inline float __exp10f(float x) noexcept { return ::exp10f(x); }
inline float __logf(float x) noexcept { return std::log(x); }
inline float __log2f(float x) noexcept { return std::log2(x); }
inline float __log10f(float x) noexcept { return std::log10(x); }
inline float __sinf(float x) noexcept { return std::sin(x); }
inline float __cosf(float x) noexcept { return std::cos(x); }
inline float __tanf(float x) noexcept { return std::tan(x); }
inline float __tanhf(float x) noexcept { return std::tanh(x); }
inline void __sincosf(float x, float* s, float* c) noexcept { ::sincosf(x, s, c); }
inline float __powf(float x, float y) noexcept { return std::pow(x, y); }
// As on the GPU: for 2^126 < |y| < 2^128 the fast reciprocal flushes to zero (so inf / y is NaN).
inline float __fdividef(float x, float y) noexcept {
    const float ay = std::fabs(y);
    return ay > 0x1p126f && ay <= FLT_MAX ? x * std::copysign(0.0f, y) : x / y;
}
inline float __saturatef(float x) noexcept { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }  // NaN -> 0
inline float __frsqrt_rn(float x) noexcept { return rsqrtf(x); }

#define CUDAOPT_ROUNDED(suffix, mode)                                                                                          \
    inline float __fadd_##suffix(float x, float y) { return ::cudaopt::dev::add(x, y, mode); }                                 \
    inline float __fsub_##suffix(float x, float y) { return ::cudaopt::dev::add(x, -y, mode); }                                \
    inline float __fmul_##suffix(float x, float y) { return ::cudaopt::dev::mul(x, y, mode); }                                 \
    inline float __fmaf_##suffix(float x, float y, float z) { return ::cudaopt::dev::fma(x, y, z, mode); }                     \
    inline float __fmaf_ieee_##suffix(float x, float y, float z) { return ::cudaopt::dev::fma(x, y, z, mode); }                \
    inline float __fdiv_##suffix(float x, float y) { return ::cudaopt::dev::div(x, y, mode); }                                 \
    inline float __frcp_##suffix(float x) { return ::cudaopt::dev::div(1.0f, x, mode); }                                       \
    inline float __fsqrt_##suffix(float x) { return ::cudaopt::dev::sqrt(x, mode); }                                           \
    inline double __dadd_##suffix(double x, double y) { return ::cudaopt::dev::add(x, y, mode); }                              \
    inline double __dsub_##suffix(double x, double y) { return ::cudaopt::dev::add(x, -y, mode); }                             \
    inline double __dmul_##suffix(double x, double y) { return ::cudaopt::dev::mul(x, y, mode); }                              \
    inline double __fma_##suffix(double x, double y, double z) { return ::cudaopt::dev::fma(x, y, z, mode); }                  \
    inline double __ddiv_##suffix(double x, double y) { return ::cudaopt::dev::div(x, y, mode); }                              \
    inline double __drcp_##suffix(double x) { return ::cudaopt::dev::div(1.0, x, mode); }                                      \
    inline double __dsqrt_##suffix(double x) { return ::cudaopt::dev::sqrt(x, mode); }                                         \
    inline int __float2int_##suffix(float x) { return ::cudaopt::dev::to_int<int>(x, mode); }                                 \
    inline unsigned int __float2uint_##suffix(float x) { return ::cudaopt::dev::to_int<unsigned int>(x, mode); }               \
    inline long long __float2ll_##suffix(float x) { return ::cudaopt::dev::to_int<long long>(x, mode); }                       \
    inline unsigned long long __float2ull_##suffix(float x) { return ::cudaopt::dev::to_int<unsigned long long>(x, mode); }    \
    inline int __double2int_##suffix(double x) { return ::cudaopt::dev::to_int<int>(x, mode); }                               \
    inline unsigned int __double2uint_##suffix(double x) { return ::cudaopt::dev::to_int<unsigned int>(x, mode); }             \
    inline long long __double2ll_##suffix(double x) { return ::cudaopt::dev::to_int<long long>(x, mode); }                     \
    inline unsigned long long __double2ull_##suffix(double x) { return ::cudaopt::dev::to_int<unsigned long long>(x, mode); }  \
    inline float __int2float_##suffix(int x) { return ::cudaopt::dev::from_int<float>(x, mode); }                              \
    inline float __uint2float_##suffix(unsigned int x) { return ::cudaopt::dev::from_int<float>(x, mode); }                    \
    inline float __ll2float_##suffix(long long x) { return ::cudaopt::dev::from_int<float>(x, mode); }                         \
    inline float __ull2float_##suffix(unsigned long long x) { return ::cudaopt::dev::from_int<float>(x, mode); }               \
    inline double __ll2double_##suffix(long long x) { return ::cudaopt::dev::from_int<double>(x, mode); }                      \
    inline double __ull2double_##suffix(unsigned long long x) { return ::cudaopt::dev::from_int<double>(x, mode); }            \
    inline float __double2float_##suffix(double x) { return ::cudaopt::dev::narrow(x, mode); }
CUDAOPT_ROUNDED(rn, ::cudaopt::dev::Round::nearest)
CUDAOPT_ROUNDED(rz, ::cudaopt::dev::Round::zero)
CUDAOPT_ROUNDED(ru, ::cudaopt::dev::Round::up)
CUDAOPT_ROUNDED(rd, ::cudaopt::dev::Round::down)
#undef CUDAOPT_ROUNDED
constexpr double __int2double_rn(int x) { return x; }
constexpr double __uint2double_rn(unsigned int x) { return x; }

/* ───────────────────────── 10. Memory: cache-hinted loads and stores, fences ─────────────────────────
 * Cache hints are plain accesses on the CPU. Stores take the value in a non-deduced context so that
 * __stcg(float_ptr, 1.0) converts as CUDA's per-type overloads do. */
namespace cudaopt {
namespace dev {
template <class T>
struct Same {
    using type = T;
};
}  // namespace dev
}  // namespace cudaopt
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, typename ::cudaopt::dev::Same<T>::type v) { *p = v; }
template <class T> inline void __stcg(T* p, typename ::cudaopt::dev::Same<T>::type v) { *p = v; }
template <class T> inline void __stcs(T* p, typename ::cudaopt::dev::Same<T>::type v) { *p = v; }
template <class T> inline void __stwt(T* p, typename ::cudaopt::dev::Same<T>::type v) { *p = v; }

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ───────────────────────── 11. Atomics ─────────────────────────
 * Real atomics (blocks run concurrently), all returning the old value. Sequentially consistent: on
 * x86-64 a locked read-modify-write costs the same whatever the order, and the stronger order keeps the
 * compiler from moving a kernel's plain accesses across them. Floating point and the min/max/inc/dec
 * family use a compare-exchange loop on the bit pattern. The `long`/`unsigned long` overloads exist
 * because <cstdint> on Linux makes int64_t/uint64_t `long`, where NVRTC's makes them `long long`. */
namespace cudaopt {
namespace dev {
constexpr int kAtomicOrder = __ATOMIC_SEQ_CST;
template <class T, class F>
inline T atomic_update(T* address, F update) {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T desired = update(old);
    while (!__atomic_compare_exchange(address, &old, &desired, false, kAtomicOrder, __ATOMIC_RELAXED)) desired = update(old);
    return old;
}
template <class T>
inline T atomic_cas(T* address, T compare, T val) {
    __atomic_compare_exchange_n(address, &compare, val, false, kAtomicOrder, kAtomicOrder);
    return compare;  // the old value whether or not the exchange happened
}
template <class T>
inline T atomic_min(T* address, T val) { return atomic_update(address, [val](T old) { return val < old ? val : old; }); }
template <class T>
inline T atomic_max(T* address, T val) { return atomic_update(address, [val](T old) { return old < val ? val : old; }); }
}  // namespace dev
}  // namespace cudaopt

#define CUDAOPT_ATOMIC_BITS(T)                                                                                           \
    inline T atomicAnd(T* address, T val) { return __atomic_fetch_and(address, val, ::cudaopt::dev::kAtomicOrder); }    \
    inline T atomicOr(T* address, T val) { return __atomic_fetch_or(address, val, ::cudaopt::dev::kAtomicOrder); }      \
    inline T atomicXor(T* address, T val) { return __atomic_fetch_xor(address, val, ::cudaopt::dev::kAtomicOrder); }    \
    inline T atomicMin(T* address, T val) { return ::cudaopt::dev::atomic_min(address, val); }                          \
    inline T atomicMax(T* address, T val) { return ::cudaopt::dev::atomic_max(address, val); }
#define CUDAOPT_ATOMIC_WORD(T)                                                                                           \
    inline T atomicAdd(T* address, T val) { return __atomic_fetch_add(address, val, ::cudaopt::dev::kAtomicOrder); }    \
    inline T atomicExch(T* address, T val) { return __atomic_exchange_n(address, val, ::cudaopt::dev::kAtomicOrder); }  \
    inline T atomicCAS(T* address, T compare, T val) { return ::cudaopt::dev::atomic_cas(address, compare, val); }
CUDAOPT_ATOMIC_BITS(int)
CUDAOPT_ATOMIC_BITS(unsigned int)
CUDAOPT_ATOMIC_BITS(long long)
CUDAOPT_ATOMIC_BITS(unsigned long long)
CUDAOPT_ATOMIC_BITS(long)
CUDAOPT_ATOMIC_BITS(unsigned long)
CUDAOPT_ATOMIC_WORD(int)
CUDAOPT_ATOMIC_WORD(unsigned int)
CUDAOPT_ATOMIC_WORD(unsigned long long)
CUDAOPT_ATOMIC_WORD(unsigned long)
#undef CUDAOPT_ATOMIC_BITS
#undef CUDAOPT_ATOMIC_WORD
inline int atomicSub(int* address, int val) { return __atomic_fetch_sub(address, val, ::cudaopt::dev::kAtomicOrder); }
inline unsigned int atomicSub(unsigned int* address, unsigned int val) { return __atomic_fetch_sub(address, val, ::cudaopt::dev::kAtomicOrder); }
inline unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val) {
    return ::cudaopt::dev::atomic_cas(address, compare, val);
}
inline float atomicAdd(float* address, float val) { return ::cudaopt::dev::atomic_update(address, [val](float old) { return old + val; }); }
inline double atomicAdd(double* address, double val) { return ::cudaopt::dev::atomic_update(address, [val](double old) { return old + val; }); }
// sm_90 vector adds: atomic per element, as CUDA documents them.
inline float2 atomicAdd(float2* address, float2 val) { return float2{atomicAdd(&address->x, val.x), atomicAdd(&address->y, val.y)}; }
inline float4 atomicAdd(float4* address, float4 val) {
    return float4{atomicAdd(&address->x, val.x), atomicAdd(&address->y, val.y), atomicAdd(&address->z, val.z), atomicAdd(&address->w, val.w)};
}
inline float atomicExch(float* address, float val) {
    float old;
    __atomic_exchange(address, &val, &old, ::cudaopt::dev::kAtomicOrder);
    return old;
}
// CUDA's wrap-around counters: inc resets to 0 once old >= val, dec reloads val at 0 or above val.
inline unsigned int atomicInc(unsigned int* address, unsigned int val) {
    return ::cudaopt::dev::atomic_update(address, [val](unsigned int old) { return old >= val ? 0u : old + 1u; });
}
inline unsigned int atomicDec(unsigned int* address, unsigned int val) {
    return ::cudaopt::dev::atomic_update(address, [val](unsigned int old) { return (old == 0u || old > val) ? val : old - 1u; });
}
// Scoped variants: every scope is the whole process here.
#define atomicAdd_block atomicAdd
#define atomicSub_block atomicSub
#define atomicExch_block atomicExch
#define atomicMin_block atomicMin
#define atomicMax_block atomicMax
#define atomicInc_block atomicInc
#define atomicDec_block atomicDec
#define atomicCAS_block atomicCAS
#define atomicAnd_block atomicAnd
#define atomicOr_block atomicOr
#define atomicXor_block atomicXor
#define atomicAdd_system atomicAdd
#define atomicSub_system atomicSub
#define atomicExch_system atomicExch
#define atomicMin_system atomicMin
#define atomicMax_system atomicMax
#define atomicInc_system atomicInc
#define atomicDec_system atomicDec
#define atomicCAS_system atomicCAS
#define atomicAnd_system atomicAnd
#define atomicOr_system atomicOr
#define atomicXor_system atomicXor

/* ───────────────────────── 12. Block barriers ───────────────────────── */
#define __syncthreads() ((void)::cudaopt::rt::syncthreads(__LINE__, 0, 0))
#define __syncthreads_count(...) ::cudaopt::rt::syncthreads(__LINE__, 1, (__VA_ARGS__) ? 1 : 0)
#define __syncthreads_and(...) ::cudaopt::rt::syncthreads(__LINE__, 2, (__VA_ARGS__) ? 1 : 0)
#define __syncthreads_or(...) ::cudaopt::rt::syncthreads(__LINE__, 3, (__VA_ARGS__) ? 1 : 0)

/* ───────────────────────── 13. Warp operations ─────────────────────────
 * Every lane named in the mask deposits its value with warp_exchange and reads the others'. Macros add
 * the line in front; the functions keep CUDA's default width. A lane that reads a lane outside the mask
 * (undefined in CUDA) receives all-ones bits — NaN for floating point — so the misuse shows in outputs. */
namespace cudaopt {
namespace dev {
enum class ShflMode { idx, up, down, bfly };

/* The lane whose value `lane` receives, following PTX shfl.sync: CUDA passes c = ((32 - width) << 8) |
 * clamp, where c[12:8] masks the lane bits that select a width-wide segment and clamp is 31 except for
 * up (0). Invalid sources (before the segment for up, past its end for down and bfly) give the lane its
 * own value; bfly may read an earlier segment, as CUDA documents. Only b[4:0] counts. */
constexpr unsigned int shfl_source_lane(ShflMode mode, unsigned int lane, unsigned int b, int width) {
    const unsigned int segmask = static_cast<unsigned int>(32 - width) & 31u;
    const unsigned int clamp = mode == ShflMode::up ? 0u : 31u;
    const unsigned int bval = b & 31u;
    const unsigned int min_lane = lane & segmask;
    const unsigned int max_lane = min_lane | (clamp & ~segmask);
    int j = static_cast<int>(lane);
    bool valid = false;
    switch (mode) {
        case ShflMode::idx: j = static_cast<int>(min_lane | (bval & ~segmask)); valid = j <= static_cast<int>(max_lane); break;
        case ShflMode::up: j = static_cast<int>(lane) - static_cast<int>(bval); valid = j >= static_cast<int>(max_lane); break;
        case ShflMode::down: j = static_cast<int>(lane + bval); valid = j <= static_cast<int>(max_lane); break;
        case ShflMode::bfly: j = static_cast<int>(lane ^ bval); valid = j <= static_cast<int>(max_lane); break;
    }
    return valid ? static_cast<unsigned int>(j) : lane;
}

template <class T>
inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= sizeof(unsigned long long), "warp values are at most 8 bytes");
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
}
template <class T>
inline T from_bits(unsigned long long bits) {
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return v;
}
inline bool in_mask(unsigned int mask, unsigned int lane) { return (mask >> lane) & 1u; }

template <class T>
inline T shuffle(int line, unsigned int mask, T var, ShflMode mode, unsigned int b, int width, const char* what) {
    const unsigned long long* slots = rt::warp_exchange(mask, to_bits(var), line, what);
    const unsigned int lane = rt::current()->lane;
    const unsigned int src = shfl_source_lane(mode, lane, b, width);
    if (src == lane) return var;
    return from_bits<T>(in_mask(mask, src) ? slots[src] : ~0ull);
}

#define CUDAOPT_SHUFFLES(T)                                                                                         \
    inline T shfl_sync(int line, unsigned int mask, T var, int src_lane, int width = 32) {                          \
        return shuffle(line, mask, var, ShflMode::idx, static_cast<unsigned int>(src_lane), width, "__shfl_sync");  \
    }                                                                                                               \
    inline T shfl_up_sync(int line, unsigned int mask, T var, unsigned int delta, int width = 32) {                 \
        return shuffle(line, mask, var, ShflMode::up, delta, width, "__shfl_up_sync");                              \
    }                                                                                                               \
    inline T shfl_down_sync(int line, unsigned int mask, T var, unsigned int delta, int width = 32) {               \
        return shuffle(line, mask, var, ShflMode::down, delta, width, "__shfl_down_sync");                          \
    }                                                                                                               \
    inline T shfl_xor_sync(int line, unsigned int mask, T var, int lane_mask, int width = 32) {                     \
        return shuffle(line, mask, var, ShflMode::bfly, static_cast<unsigned int>(lane_mask), width, "__shfl_xor_sync"); \
    }                                                                                                               \
    inline unsigned int match_any_sync(int line, unsigned int mask, T value) { return match_any(line, mask, to_bits(value)); } \
    inline unsigned int match_all_sync(int line, unsigned int mask, T value, int* pred) {                           \
        return match_all(line, mask, to_bits(value), pred);                                                         \
    }

// Lanes of the caller's warp that exist: the last warp of a block whose size is not a multiple of 32
// is partial, and a full mask there names lanes that vote nothing and match nothing.
inline unsigned int existing_lanes() {
    const rt::ThreadContext* t = rt::current();
    const unsigned int threads = t->block_dim.x * t->block_dim.y * t->block_dim.z;
    const unsigned int n = threads - t->warp * 32u;
    return n >= 32u ? 0xffffffffu : (1u << n) - 1u;
}
inline unsigned int match_any(int line, unsigned int mask, unsigned long long bits) {
    const unsigned long long* slots = rt::warp_exchange(mask, bits, line, "__match_any_sync");
    mask &= existing_lanes();
    unsigned int r = 0;
    for (unsigned int i = 0; i < 32; ++i)
        if (in_mask(mask, i) && slots[i] == bits) r |= 1u << i;
    return r;
}
inline unsigned int match_all(int line, unsigned int mask, unsigned long long bits, int* pred) {
    const unsigned long long* slots = rt::warp_exchange(mask, bits, line, "__match_all_sync");
    mask &= existing_lanes();
    for (unsigned int i = 0; i < 32; ++i)
        if (in_mask(mask, i) && slots[i] != bits) return *pred = 0, 0u;
    return *pred = 1, mask;
}
// CUDA's overload set for shuffles and matches: converting arguments pick the same overload as in CUDA.
CUDAOPT_SHUFFLES(int)
CUDAOPT_SHUFFLES(unsigned int)
CUDAOPT_SHUFFLES(long)
CUDAOPT_SHUFFLES(unsigned long)
CUDAOPT_SHUFFLES(long long)
CUDAOPT_SHUFFLES(unsigned long long)
CUDAOPT_SHUFFLES(float)
CUDAOPT_SHUFFLES(double)
#undef CUDAOPT_SHUFFLES

// Votes: the predicate of every lane in the mask (lanes outside it count as false).
inline unsigned int vote(int line, unsigned int mask, int pred, const char* what) {
    const unsigned long long* slots = rt::warp_exchange(mask, pred != 0, line, what);
    unsigned int r = 0;
    for (unsigned int i = 0; i < 32; ++i)
        if (in_mask(mask, i) && slots[i]) r |= 1u << i;
    return r;
}
inline unsigned int ballot_sync(int line, unsigned int mask, int pred) { return vote(line, mask, pred, "__ballot_sync"); }
inline int all_sync(int line, unsigned int mask, int pred) {
    return vote(line, mask, pred, "__all_sync") == (mask & existing_lanes());
}
inline int any_sync(int line, unsigned int mask, int pred) { return vote(line, mask, pred, "__any_sync") != 0; }
inline int uni_sync(int line, unsigned int mask, int pred) {
    const unsigned int votes = vote(line, mask, pred, "__uni_sync");
    return votes == 0 || votes == (mask & existing_lanes());
}

// Reductions over the lanes of the mask (sm_80): add wraps, and/or/xor are unsigned only.
enum class ReduceOp { add, min_s, max_s, min_u, max_u, bit_and, bit_or, bit_xor };
inline unsigned int reduce(int line, unsigned int mask, unsigned int value, ReduceOp op, const char* what) {
    const unsigned long long* slots = rt::warp_exchange(mask, value, line, what);
    bool first = true;
    unsigned int r = 0;
    for (unsigned int i = 0; i < 32; ++i) {
        if (!in_mask(mask, i)) continue;
        const unsigned int v = static_cast<unsigned int>(slots[i]);
        if (first) { r = v, first = false; continue; }
        switch (op) {
            case ReduceOp::add: r += v; break;
            case ReduceOp::min_s: r = static_cast<int>(v) < static_cast<int>(r) ? v : r; break;
            case ReduceOp::max_s: r = static_cast<int>(v) > static_cast<int>(r) ? v : r; break;
            case ReduceOp::min_u: r = v < r ? v : r; break;
            case ReduceOp::max_u: r = v > r ? v : r; break;
            case ReduceOp::bit_and: r &= v; break;
            case ReduceOp::bit_or: r |= v; break;
            case ReduceOp::bit_xor: r ^= v; break;
        }
    }
    return r;
}
inline unsigned int reduce_add_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::add, "__reduce_add_sync"); }
inline int reduce_add_sync(int line, unsigned int mask, int v) {
    return static_cast<int>(reduce(line, mask, static_cast<unsigned int>(v), ReduceOp::add, "__reduce_add_sync"));
}
inline unsigned int reduce_min_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::min_u, "__reduce_min_sync"); }
inline int reduce_min_sync(int line, unsigned int mask, int v) {
    return static_cast<int>(reduce(line, mask, static_cast<unsigned int>(v), ReduceOp::min_s, "__reduce_min_sync"));
}
inline unsigned int reduce_max_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::max_u, "__reduce_max_sync"); }
inline int reduce_max_sync(int line, unsigned int mask, int v) {
    return static_cast<int>(reduce(line, mask, static_cast<unsigned int>(v), ReduceOp::max_s, "__reduce_max_sync"));
}
inline unsigned int reduce_and_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::bit_and, "__reduce_and_sync"); }
inline unsigned int reduce_or_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::bit_or, "__reduce_or_sync"); }
inline unsigned int reduce_xor_sync(int line, unsigned int mask, unsigned int v) { return reduce(line, mask, v, ReduceOp::bit_xor, "__reduce_xor_sync"); }

// __syncwarp() and __syncwarp(mask) through one macro: the object carries the line, the call the mask.
struct WarpSync {
    int line;
    void operator()(unsigned int mask = 0xffffffffu) const { rt::syncwarp(mask, line); }
};
}  // namespace dev
}  // namespace cudaopt

#define __shfl_sync(...) ::cudaopt::dev::shfl_sync(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::cudaopt::dev::shfl_up_sync(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::cudaopt::dev::shfl_down_sync(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::cudaopt::dev::shfl_xor_sync(__LINE__, __VA_ARGS__)
#define __ballot_sync(...) ::cudaopt::dev::ballot_sync(__LINE__, __VA_ARGS__)
#define __all_sync(...) ::cudaopt::dev::all_sync(__LINE__, __VA_ARGS__)
#define __any_sync(...) ::cudaopt::dev::any_sync(__LINE__, __VA_ARGS__)
#define __uni_sync(...) ::cudaopt::dev::uni_sync(__LINE__, __VA_ARGS__)
#define __match_any_sync(...) ::cudaopt::dev::match_any_sync(__LINE__, __VA_ARGS__)
#define __match_all_sync(...) ::cudaopt::dev::match_all_sync(__LINE__, __VA_ARGS__)
#define __reduce_add_sync(...) ::cudaopt::dev::reduce_add_sync(__LINE__, __VA_ARGS__)
#define __reduce_min_sync(...) ::cudaopt::dev::reduce_min_sync(__LINE__, __VA_ARGS__)
#define __reduce_max_sync(...) ::cudaopt::dev::reduce_max_sync(__LINE__, __VA_ARGS__)
#define __reduce_and_sync(...) ::cudaopt::dev::reduce_and_sync(__LINE__, __VA_ARGS__)
#define __reduce_or_sync(...) ::cudaopt::dev::reduce_or_sync(__LINE__, __VA_ARGS__)
#define __reduce_xor_sync(...) ::cudaopt::dev::reduce_xor_sync(__LINE__, __VA_ARGS__)
#define __syncwarp(...) ::cudaopt::dev::WarpSync{__LINE__}(__VA_ARGS__)

// Lanes that have not exited (fibers do not diverge the way a SIMT warp does).
inline unsigned int __activemask() { return ::cudaopt::rt::active_mask(); }
// PTX's %lanemask_* registers, which CUDA C++ has no names for. Templates, so that a candidate's own
// helper of the same name takes precedence instead of clashing.
template <class = void> inline unsigned int __lanemask_eq() { return 1u << ::cudaopt::rt::current()->lane; }
template <class = void> inline unsigned int __lanemask_lt() { return (1u << ::cudaopt::rt::current()->lane) - 1u; }
template <class = void> inline unsigned int __lanemask_le() { return (2u << ::cudaopt::rt::current()->lane) - 1u; }
template <class = void> inline unsigned int __lanemask_gt() { return ~__lanemask_le(); }
template <class = void> inline unsigned int __lanemask_ge() { return ~__lanemask_lt(); }

/* ───────────────────────── 14. Time, traps, assert, printf ───────────────────────── */
namespace cudaopt {
namespace dev {
inline long long nanoseconds(clockid_t clock_id) {
    timespec ts;
    clock_gettime(clock_id, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
// A free-running cycle counter, like the SM clock that clock()/clock64() read.
inline long long cycles() {
#if defined(__x86_64__) || defined(__i386__)
    return static_cast<long long>(__builtin_ia32_rdtsc());
#else
    return nanoseconds(CLOCK_MONOTONIC);
#endif
}
}  // namespace dev
}  // namespace cudaopt
// clock() is a macro because <time.h> already declares the C library's clock() with C linkage.
#define clock() (static_cast<clock_t>(::cudaopt::dev::cycles()))
inline long long clock64() { return ::cudaopt::dev::cycles(); }
// Nanoseconds, like PTX's %globaltimer (a template for the same reason as __lanemask_*).
template <class = void> inline unsigned long long __globaltimer() {
    return static_cast<unsigned long long>(::cudaopt::dev::nanoseconds(CLOCK_REALTIME));
}
// A busy wait of about ns nanoseconds (the GPU caps it near 1 ms). It does not let other fibers run.
inline void __nanosleep(unsigned int ns) {
    const long long end = ::cudaopt::dev::nanoseconds(CLOCK_MONOTONIC) + (ns < 1000000u ? ns : 1000000u);
    while (::cudaopt::dev::nanoseconds(CLOCK_MONOTONIC) < end) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}
inline void __prof_trigger(int) {}

#define __trap() ::cudaopt::rt::kernel_error(__LINE__, "__trap() was called")
#define __brkpt() ::cudaopt::rt::kernel_error(__LINE__, "__brkpt() was called")
// CUDA's device assert: a failed assertion ends the launch with an error naming the condition.
// Variadic so that a condition with template commas stays one argument.
#undef assert
#ifdef NDEBUG
#define assert(...) ((void)0)
#else
#define assert(...) \
    (static_cast<bool>(__VA_ARGS__) ? void(0) : ::cudaopt::rt::kernel_error(__LINE__, "assertion `%s` failed", #__VA_ARGS__))
#endif
// Device printf, serialised across blocks by the runtime (std::printf in headers above is unaffected).
#define printf(...) ::cudaopt::rt::device_printf(__VA_ARGS__)

#endif  // CUDAOPT_CPU_H
