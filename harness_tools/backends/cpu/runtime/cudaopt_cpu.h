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

#include "cudaopt_cpu_intrinsics.h"
#include "cudaopt_cpu_math.h"
#include "cudaopt_cpu_sync.h"

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
