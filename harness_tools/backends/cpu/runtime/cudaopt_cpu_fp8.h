/* cudaopt_cpu_fp8.h — CUDA's 8-bit floats for the cpu backend (cuda_fp8.h): __nv_fp8_e4m3 and __nv_fp8_e5m2, their
 * pairs and quads (__nv_fp8x2_*, __nv_fp8x4_*) and the __nv_cvt_* conversions. The e8m0 scale type is not here
 * (translate.py refuses it).
 *
 * Reached through <cuda_fp8.h> (in this folder), which brings in the 16-bit floats (cudaopt_cpu_half.h) as CUDA's
 * does. A value is its bit pattern. As in CUDA these are storage types: they have no arithmetic, and every
 * conversion to or from them is explicit.
 *
 *   e4m3 (1 sign, 4 exponent, 3 mantissa bits, bias 7): no infinities; NaN only S.1111.111 (0x7F, 0xFF);
 *        largest finite 448 (0x7E), smallest subnormal 2^-9.
 *   e5m2 (1, 5, 2, bias 15): IEEE-like, the top byte of a __half; inf 0x7C, NaN 0x7D..0x7F; largest finite
 *        57344 (0x7B), smallest subnormal 2^-16.
 *
 * Narrowing rounds the exact source value (float, __half and __nv_bfloat16 widen to double exactly) once to
 * nearest even, subnormals kept, signed zeros kept. What lies beyond the finite range depends on the saturation
 * argument; the constructors use __NV_SATFINITE:
 *   __NV_SATFINITE  ±largest finite, infinities too;
 *   __NV_NOSAT      e5m2 ±inf; e4m3 NaN with the value's sign (0x7F, 0xFF), having no infinity.
 * Only what rounds past the largest finite overflows: e4m3 keeps 448 up to 464 (the tie rounds to 448's even
 * significand), e5m2 keeps 57344 below 61440 (there the tie rounds up, 57344's significand being odd).
 * NaN sources: a float, __half or __nv_bfloat16 NaN of any sign and payload gives 0x7F in both formats (CUDA
 * makes it the canonical float NaN first; on sm_89+ cvt.rn.satfinite does the same); a double NaN keeps its
 * sign and gives e4m3 0x7F, e5m2 0x7E | its payload's top two bits, as cuda_fp8.hpp's double conversion does on
 * host and device alike.
 * Widening is exact. To __half: e5m2 is the top byte, e4m3 is re-biased; every NaN becomes the canonical half
 * NaN 0x7FFF (its sign dropped), so float and double get a NaN. To __nv_bfloat16 through float (exact: every
 * fp8 value is a bfloat16). To integers: toward zero, NaN to 0, beyond the type's range its nearest limit (as
 * CUDA's __half2int_rz family and its explicit clamps for the char types). To bool: nonzero magnitude bits. */
#ifndef CUDAOPT_CPU_FP8_H
#define CUDAOPT_CPU_FP8_H

#include "cudaopt_cpu_half.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short int __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;

namespace cudaopt {
namespace fp8 {
struct Format {
    int mantissa_bits, bias;
    unsigned char max_bits;  // the largest finite value's bits
    double max_value;
    bool has_inf;
};
constexpr Format e4m3{3, 7, 0x7E, 448.0, false};
constexpr Format e5m2{2, 15, 0x7B, 57344.0, true};
inline const Format& format(__nv_fp8_interpretation_t kind) { return kind == __NV_E5M2 ? e5m2 : e4m3; }

// The bits nearest a non-NaN `v` (ties to even), saturated or not beyond the finite range.
inline unsigned char encode(double v, __nv_saturation_t saturate, const Format& f) {
    const unsigned char sign = std::signbit(v) ? 0x80 : 0x00;
    const double a = std::fabs(v);
    const unsigned char overflow =
        sign | (saturate == __NV_SATFINITE ? f.max_bits : f.has_inf ? 0x7C : 0x7F);
    if (a == 0.0) return sign;
    if (std::isinf(a)) return overflow;
    int e;
    std::frexp(a, &e);
    const int binade = std::max(e - 1, 1 - f.bias);  // the subnormals share the lowest normal binade's spacing
    const double scaled = std::ldexp(a, f.mantissa_bits - binade);  // in units of the spacing: exact
    const double low = std::floor(scaled), rest = scaled - low;
    const double n = low + (rest > 0.5 || (rest == 0.5 && std::fmod(low, 2.0) != 0.0));
    if (std::ldexp(n, binade - f.mantissa_bits) > f.max_value) return overflow;
    // exponent field + significand: a significand rounded up to 2^(M+1) carries into the exponent by itself, and
    // a subnormal one rounded up to 2^M becomes the smallest normal
    return sign | static_cast<unsigned char>(((binade + f.bias - 1) << f.mantissa_bits) + static_cast<int>(n));
}

inline bool is_nan(unsigned char bits, const Format& f) {
    return f.has_inf ? (bits & 0x7F) > 0x7C : (bits & 0x7F) == 0x7F;
}

// The exact value of non-NaN bits.
inline double decode(unsigned char bits, const Format& f) {
    const int exponent_bits = 7 - f.mantissa_bits;
    const int exp = (bits >> f.mantissa_bits) & ((1 << exponent_bits) - 1), mant = bits & ((1 << f.mantissa_bits) - 1);
    const double sign = (bits & 0x80) ? -1.0 : 1.0;
    if (f.has_inf && exp == (1 << exponent_bits) - 1) return sign * INFINITY;
    return sign * (exp ? std::ldexp(mant + (1 << f.mantissa_bits), exp - f.bias - f.mantissa_bits)
                       : std::ldexp(mant, 1 - f.bias - f.mantissa_bits));
}

inline unsigned char from_double(double x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind) {
    const Format& f = format(kind);
    if (!std::isnan(x)) return encode(x, saturate, f);
    unsigned long long bits;
    std::memcpy(&bits, &x, 8);
    const unsigned char sign = std::signbit(x) ? 0x80 : 0x00;
    return sign | (kind == __NV_E4M3 ? 0x7F : 0x7E | static_cast<unsigned char>((bits >> 50) & 3u));
}

inline unsigned char from_float(float x, __nv_saturation_t saturate, __nv_fp8_interpretation_t kind) {
    return std::isnan(x) ? 0x7F : encode(x, saturate, format(kind));
}

inline unsigned short to_half_bits(unsigned char bits, __nv_fp8_interpretation_t kind) {
    const Format& f = format(kind);
    if (is_nan(bits, f)) return 0x7FFF;
    return ::cudaopt::half::encode<10, 5>(decode(bits, f), ::cudaopt::half::Round::rn);  // exact
}

inline float to_float(unsigned char bits, __nv_fp8_interpretation_t kind) {
    const Format& f = format(kind);
    return is_nan(bits, f) ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(decode(bits, f));
}

// toward zero, NaN to 0, saturated to I's range
template <class I>
inline I to_integer(float f) {
    if (std::isnan(f)) return 0;
    if (f >= static_cast<float>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    if (f <= static_cast<float>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    return static_cast<I>(f);
}

template <__nv_fp8_interpretation_t K>
struct alignas(1) Scalar {
    __nv_fp8_storage_t __x;
    Scalar() = default;
    explicit Scalar(const __half f) : __x(from_float(float(f), __NV_SATFINITE, K)) {}
    explicit Scalar(const __nv_bfloat16 f) : __x(from_float(float(f), __NV_SATFINITE, K)) {}
    explicit Scalar(const float f) : __x(from_float(f, __NV_SATFINITE, K)) {}
    explicit Scalar(const double f) : __x(from_double(f, __NV_SATFINITE, K)) {}
    // CUDA's integer constructors go through float (a 64-bit integer is rounded to float first)
    template <class I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
    explicit Scalar(const I val) : __x(from_float(static_cast<float>(val), __NV_SATFINITE, K)) {}

    explicit operator __half() const { return __half::from_bits(to_half_bits(__x, K)); }
    explicit operator float() const { return to_float(__x, K); }
    explicit operator double() const { return to_float(__x, K); }
    explicit operator __nv_bfloat16() const { return __float2bfloat16_rz(to_float(__x, K)); }
    explicit operator bool() const { return (__x & 0x7F) != 0; }
    template <class I, typename std::enable_if<std::is_integral<I>::value && !std::is_same<I, bool>::value,
                                               int>::type = 0>
    explicit operator I() const { return to_integer<I>(to_float(__x, K)); }
};

template <__nv_fp8_interpretation_t K>
struct alignas(2) Pair {
    __nv_fp8x2_storage_t __x;
    Pair() = default;
    explicit Pair(const __half2 f) : __x(pack(from_float(float(f.x), __NV_SATFINITE, K), from_float(float(f.y), __NV_SATFINITE, K))) {}
    explicit Pair(const __nv_bfloat162 f)
        : __x(pack(from_float(float(f.x), __NV_SATFINITE, K), from_float(float(f.y), __NV_SATFINITE, K))) {}
    explicit Pair(const float2 f) : __x(pack(from_float(f.x, __NV_SATFINITE, K), from_float(f.y, __NV_SATFINITE, K))) {}
    explicit Pair(const double2 f) : __x(pack(from_double(f.x, __NV_SATFINITE, K), from_double(f.y, __NV_SATFINITE, K))) {}
    explicit operator __half2() const {
        return {__half::from_bits(to_half_bits(__x & 0xFF, K)), __half::from_bits(to_half_bits(__x >> 8, K))};
    }
    explicit operator float2() const { return {to_float(__x & 0xFF, K), to_float(__x >> 8, K)}; }
    static __nv_fp8x2_storage_t pack(unsigned char lo, unsigned char hi) {
        return static_cast<__nv_fp8x2_storage_t>(lo | (hi << 8));
    }
};

template <__nv_fp8_interpretation_t K>
struct alignas(4) Quad {
    __nv_fp8x4_storage_t __x;
    Quad() = default;
    explicit Quad(const __half2 lo, const __half2 hi) : __x(pack(Pair<K>(lo).__x, Pair<K>(hi).__x)) {}
    explicit Quad(const __nv_bfloat162 lo, const __nv_bfloat162 hi) : __x(pack(Pair<K>(lo).__x, Pair<K>(hi).__x)) {}
    explicit Quad(const float4 f) : __x(pack(Pair<K>(float2{f.x, f.y}).__x, Pair<K>(float2{f.z, f.w}).__x)) {}
    explicit Quad(const double4 f) : __x(pack(Pair<K>(double2{f.x, f.y}).__x, Pair<K>(double2{f.z, f.w}).__x)) {}
    explicit Quad(const double4_16a f) : __x(pack(Pair<K>(double2{f.x, f.y}).__x, Pair<K>(double2{f.z, f.w}).__x)) {}
    explicit Quad(const double4_32a f) : __x(pack(Pair<K>(double2{f.x, f.y}).__x, Pair<K>(double2{f.z, f.w}).__x)) {}
    explicit operator float4() const {
        return {to_float(__x & 0xFF, K), to_float((__x >> 8) & 0xFF, K), to_float((__x >> 16) & 0xFF, K),
                to_float(__x >> 24, K)};
    }
    static __nv_fp8x4_storage_t pack(__nv_fp8x2_storage_t lo, __nv_fp8x2_storage_t hi) {
        return static_cast<__nv_fp8x4_storage_t>(lo) | (static_cast<__nv_fp8x4_storage_t>(hi) << 16);
    }
};
}  // namespace fp8
}  // namespace cudaopt

// Named structs, as in CUDA (a kernel may forward-declare or specialize on them).
struct __nv_fp8_e4m3 : ::cudaopt::fp8::Scalar<__NV_E4M3> { using Scalar::Scalar; };
struct __nv_fp8_e5m2 : ::cudaopt::fp8::Scalar<__NV_E5M2> { using Scalar::Scalar; };
struct __nv_fp8x2_e4m3 : ::cudaopt::fp8::Pair<__NV_E4M3> { using Pair::Pair; };
struct __nv_fp8x2_e5m2 : ::cudaopt::fp8::Pair<__NV_E5M2> { using Pair::Pair; };
struct __nv_fp8x4_e4m3 : ::cudaopt::fp8::Quad<__NV_E4M3> { using Quad::Quad; };
struct __nv_fp8x4_e5m2 : ::cudaopt::fp8::Quad<__NV_E5M2> { using Quad::Quad; };
static_assert(sizeof(__nv_fp8_e4m3) == 1 && sizeof(__nv_fp8x2_e5m2) == 2 && alignof(__nv_fp8x2_e5m2) == 2 &&
                  sizeof(__nv_fp8x4_e4m3) == 4 && alignof(__nv_fp8x4_e4m3) == 4,
              "CUDA's sizes and alignments");

/* ── the C-style conversions ── */
inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(const double x, const __nv_saturation_t saturate,
                                                 const __nv_fp8_interpretation_t fp8_interpretation) {
    return ::cudaopt::fp8::from_double(x, saturate, fp8_interpretation);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(const float x, const __nv_saturation_t saturate,
                                                const __nv_fp8_interpretation_t fp8_interpretation) {
    return ::cudaopt::fp8::from_float(x, saturate, fp8_interpretation);
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(const __half_raw x, const __nv_saturation_t saturate,
                                                  const __nv_fp8_interpretation_t fp8_interpretation) {
    return ::cudaopt::fp8::from_float(float(__half(x)), saturate, fp8_interpretation);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(const __nv_bfloat16_raw x, const __nv_saturation_t saturate,
                                                      const __nv_fp8_interpretation_t fp8_interpretation) {
    return ::cudaopt::fp8::from_float(float(__nv_bfloat16(x)), saturate, fp8_interpretation);
}
// pairs: x in the low byte
#define CUDAOPT_FP8_PAIR(name, From, one)                                                                        \
    inline __nv_fp8x2_storage_t name(const From x, const __nv_saturation_t saturate,                              \
                                     const __nv_fp8_interpretation_t fp8_interpretation) {                        \
        return static_cast<__nv_fp8x2_storage_t>(one(x.x, saturate, fp8_interpretation) |                         \
                                                 (one(x.y, saturate, fp8_interpretation) << 8));                  \
    }
CUDAOPT_FP8_PAIR(__nv_cvt_double2_to_fp8x2, double2, __nv_cvt_double_to_fp8)
CUDAOPT_FP8_PAIR(__nv_cvt_float2_to_fp8x2, float2, __nv_cvt_float_to_fp8)
#undef CUDAOPT_FP8_PAIR
inline __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(const __half2_raw x, const __nv_saturation_t saturate,
                                                       const __nv_fp8_interpretation_t fp8_interpretation) {
    return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_halfraw_to_fp8(__half_raw{x.x}, saturate, fp8_interpretation) |
                                             (__nv_cvt_halfraw_to_fp8(__half_raw{x.y}, saturate, fp8_interpretation) << 8));
}
inline __nv_fp8x2_storage_t __nv_cvt_bfloat16raw2_to_fp8x2(const __nv_bfloat162_raw x, const __nv_saturation_t saturate,
                                                           const __nv_fp8_interpretation_t fp8_interpretation) {
    return static_cast<__nv_fp8x2_storage_t>(
        __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.x}, saturate, fp8_interpretation) |
        (__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.y}, saturate, fp8_interpretation) << 8));
}
inline __half_raw __nv_cvt_fp8_to_halfraw(const __nv_fp8_storage_t x, const __nv_fp8_interpretation_t fp8_interpretation) {
    return __half_raw{::cudaopt::fp8::to_half_bits(x, fp8_interpretation)};
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(const __nv_fp8x2_storage_t x,
                                              const __nv_fp8_interpretation_t fp8_interpretation) {
    return __half2_raw{::cudaopt::fp8::to_half_bits(static_cast<unsigned char>(x & 0xFF), fp8_interpretation),
                       ::cudaopt::fp8::to_half_bits(static_cast<unsigned char>(x >> 8), fp8_interpretation)};
}

#endif  // CUDAOPT_CPU_FP8_H
