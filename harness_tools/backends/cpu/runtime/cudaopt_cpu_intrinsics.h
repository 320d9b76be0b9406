/* cudaopt_cpu_intrinsics.h: bit, integer and SIMD-in-a-word intrinsics.
 * Part of cudaopt_cpu.h, which includes it in order: include cudaopt_cpu.h, not this file. */
#ifndef CUDAOPT_CPU_INTRINSICS_H
#define CUDAOPT_CPU_INTRINSICS_H

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


#endif  // CUDAOPT_CPU_INTRINSICS_H
