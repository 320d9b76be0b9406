/* cudaopt_cpu_half.h — CUDA's 16-bit floats for the cpu backend: __half (cuda_fp16.h), __nv_bfloat16
 * (cuda_bf16.h), their pairs __half2 / __nv_bfloat162, the raw forms (__half_raw, __half2_raw, ...), conversions,
 * arithmetic and the common intrinsics. cudaopt_cpu_fp8.h builds the fp8 types on them.
 *
 * Reached through <cuda_fp16.h> or <cuda_bf16.h> (both in this folder), as in CUDA, after the force-included
 * cudaopt_cpu.h. A value is its 16-bit pattern. Conversions round as the GPU's cvt does: to nearest even by
 * default (_rz/_rd/_ru as named), overflow to inf (directed modes stop at the largest finite value where IEEE
 * says so), subnormals kept, any NaN to the canonical 0x7FFF. Widening is exact; bfloat16 widens by a shift,
 * keeping a NaN's payload, like the GPU's mov.b32 {0, h}.
 *
 * Arithmetic goes through float and is rounded once: for +, -, *, / and sqrt, float's 24 significand bits are
 * at least 2p + 2 for p = 11 (half) and 8 (bfloat16), so rounding float's correctly rounded result again gives
 * the correctly rounded 16-bit result, bit for bit what the GPU's add.f16/mul.bf16 give. fma is exact in
 * double (a product of two 16-bit values is exact there) with the sum rounded to odd, then rounded once.
 * Transcendentals (hexp, hsin, ...) are float's functions rounded once; the GPU's approximations may differ
 * in the last bit. */
#ifndef CUDAOPT_CPU_HALF_H
#define CUDAOPT_CPU_HALF_H

namespace cudaopt {
namespace half {
enum class Round { rn, rz, rd, ru };

// The 16-bit pattern nearest `v` (by `mode`) in a format of M stored mantissa bits and E exponent bits.
template <int M, int E>
inline unsigned short encode(double v, Round mode) {
    constexpr int bias = (1 << (E - 1)) - 1;
    constexpr unsigned int inf_bits = ((1u << E) - 1u) << M;
    if (std::isnan(v)) return 0x7FFF;
    const unsigned short sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a == 0.0) return sign;
    // away from zero: ru for positive values, rd for negative ones (rn decides below, rz never)
    const bool away = mode == Round::ru ? !sign : mode == Round::rd ? sign != 0 : false;
    if (std::isinf(a)) return sign | inf_bits;
    int e;
    std::frexp(a, &e);
    const int binade = std::max(e - 1, 1 - bias);  // the subnormals share the lowest normal binade's spacing
    if (binade > bias) return sign | (mode == Round::rn || away ? inf_bits : inf_bits - 1u);
    const double scaled = std::ldexp(a, M - binade);  // units of the spacing: exact, a power-of-two scaling
    const double low = std::floor(scaled), rest = scaled - low;
    double n = low;
    if (mode == Round::rn) n += rest > 0.5 || (rest == 0.5 && std::fmod(low, 2.0) != 0.0);
    else if (away) n += rest > 0.0;
    // exponent field + significand: a significand that rounds up to 2^(M+1) carries into the exponent by itself
    const unsigned int bits = (static_cast<unsigned int>(binade + bias - 1) << M) + static_cast<unsigned int>(n);
    return sign | (bits >= inf_bits ? (mode == Round::rn || away ? inf_bits : inf_bits - 1u) : bits);
}

template <int M, int E>
inline float decode(unsigned short bits) {
    if (E == 8) {  // bfloat16: the top half of a float
        const unsigned int wide = static_cast<unsigned int>(bits) << 16;
        float f;
        std::memcpy(&f, &wide, 4);
        return f;
    }
    constexpr int bias = (1 << (E - 1)) - 1;
    const unsigned int exp = (bits >> M) & ((1u << E) - 1u), mant = bits & ((1u << M) - 1u);
    const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
    if (exp == (1u << E) - 1u) return mant ? std::numeric_limits<float>::quiet_NaN() : sign * INFINITY;
    const float magnitude = exp ? std::ldexp(static_cast<float>(mant | (1u << M)), static_cast<int>(exp) - bias - M)
                                : std::ldexp(static_cast<float>(mant), 1 - bias - M);
    return sign * magnitude;
}

// x + y rounded to odd (toward zero, the last bit set when inexact): one further rounding to far fewer bits
// (p + 2 <= 53) is then the correct rounding of the exact sum, which a double rounding would not be.
inline double round_to_odd_sum(double x, double y) {
    const double s = x + y, bb = s - x, err = (x - (s - bb)) + (y - bb);  // Knuth's TwoSum: s + err == x + y
    if (err == 0.0 || std::isinf(s)) return s;
    unsigned long long bits;
    std::memcpy(&bits, &s, 8);
    if (bits & 1ull) return s;
    return std::nextafter(s, err > 0 ? INFINITY : -INFINITY);
}

template <int M, int E, class Raw>
struct Float16 {
    static constexpr int mantissa_bits = M, exponent_bits = E;
    unsigned short __x;
    Float16() = default;
    Float16(const Raw& r) : __x(r.x) {}
    Float16(float f) : __x(encode<M, E>(f, Round::rn)) {}
    Float16(double d) : __x(encode<M, E>(d, Round::rn)) {}
    template <class I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
    Float16(I i) : __x(encode<M, E>(static_cast<double>(i), Round::rn)) {}
    operator Raw() const { return Raw{__x}; }
    operator float() const { return decode<M, E>(__x); }
    static Float16 from_bits(unsigned short bits) {
        Float16 h;
        h.__x = bits;
        return h;
    }
    Float16& operator+=(Float16 o) { return *this = Float16(float(*this) + float(o)); }
    Float16& operator-=(Float16 o) { return *this = Float16(float(*this) - float(o)); }
    Float16& operator*=(Float16 o) { return *this = Float16(float(*this) * float(o)); }
    Float16& operator/=(Float16 o) { return *this = Float16(float(*this) / float(o)); }
    Float16& operator++() { return *this += Float16(1.0f); }
    Float16& operator--() { return *this -= Float16(1.0f); }
    Float16 operator++(int) { Float16 old = *this; ++*this; return old; }
    Float16 operator--(int) { Float16 old = *this; --*this; return old; }
};

#define CUDAOPT_HALF_T template <int M, int E, class R>
#define CUDAOPT_HALF Float16<M, E, R>
CUDAOPT_HALF_T inline CUDAOPT_HALF operator+(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(float(a) + float(b)); }
CUDAOPT_HALF_T inline CUDAOPT_HALF operator-(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(float(a) - float(b)); }
CUDAOPT_HALF_T inline CUDAOPT_HALF operator*(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(float(a) * float(b)); }
CUDAOPT_HALF_T inline CUDAOPT_HALF operator/(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(float(a) / float(b)); }
CUDAOPT_HALF_T inline CUDAOPT_HALF operator-(CUDAOPT_HALF a) { return CUDAOPT_HALF::from_bits(a.__x ^ 0x8000); }
CUDAOPT_HALF_T inline CUDAOPT_HALF operator+(CUDAOPT_HALF a) { return a; }
CUDAOPT_HALF_T inline bool operator==(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) == float(b); }
CUDAOPT_HALF_T inline bool operator!=(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) != float(b); }
CUDAOPT_HALF_T inline bool operator<(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) < float(b); }
CUDAOPT_HALF_T inline bool operator<=(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) <= float(b); }
CUDAOPT_HALF_T inline bool operator>(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) > float(b); }
CUDAOPT_HALF_T inline bool operator>=(CUDAOPT_HALF a, CUDAOPT_HALF b) { return float(a) >= float(b); }

// __half2 / __nv_bfloat162: two values in one 32-bit word, x the low half; arithmetic per lane.
template <class T> struct RawPair;  // the raw pair of T: __half2_raw, __nv_bfloat162_raw (below)
template <class T>
struct alignas(4) Pair {
    T x, y;
    // to the raw pair, as CUDA's __half2 / __nv_bfloat162 convert (cuda_fp8.h's conversions take raw pairs)
    template <class R, class U = T,
              typename std::enable_if<std::is_same<R, typename RawPair<U>::type>::value, int>::type = 0>
    operator R() const { return R{x.__x, y.__x}; }
};
template <class T> inline Pair<T> operator+(Pair<T> a, Pair<T> b) { return {a.x + b.x, a.y + b.y}; }
template <class T> inline Pair<T> operator-(Pair<T> a, Pair<T> b) { return {a.x - b.x, a.y - b.y}; }
template <class T> inline Pair<T> operator*(Pair<T> a, Pair<T> b) { return {a.x * b.x, a.y * b.y}; }
template <class T> inline Pair<T> operator/(Pair<T> a, Pair<T> b) { return {a.x / b.x, a.y / b.y}; }
template <class T> inline Pair<T> operator-(Pair<T> a) { return {-a.x, -a.y}; }
template <class T> inline Pair<T>& operator+=(Pair<T>& a, Pair<T> b) { return a = a + b; }
template <class T> inline Pair<T>& operator*=(Pair<T>& a, Pair<T> b) { return a = a * b; }

template <class T> struct is_16bit : std::false_type {};
CUDAOPT_HALF_T struct is_16bit<CUDAOPT_HALF> : std::true_type {};
template <class T> struct is_16bit<Pair<T>> : std::true_type {};
}  // namespace half
}  // namespace cudaopt

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };
using __half = ::cudaopt::half::Float16<10, 5, __half_raw>;
using __nv_bfloat16 = ::cudaopt::half::Float16<7, 8, __nv_bfloat16_raw>;
using half = __half;
using nv_bfloat16 = __nv_bfloat16;
using __half2 = ::cudaopt::half::Pair<__half>;
using __nv_bfloat162 = ::cudaopt::half::Pair<__nv_bfloat16>;
using half2 = __half2;
using nv_bfloat162 = __nv_bfloat162;
// The raw pairs (x the low half), converting to and from the pairs as in CUDA.
struct __half2_raw {
    unsigned short x, y;
    operator __half2() const { return {__half::from_bits(x), __half::from_bits(y)}; }
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
    operator __nv_bfloat162() const { return {__nv_bfloat16::from_bits(x), __nv_bfloat16::from_bits(y)}; }
};
namespace cudaopt {
namespace half {
template <> struct RawPair<__half> { using type = ::__half2_raw; };
template <> struct RawPair<__nv_bfloat16> { using type = ::__nv_bfloat162_raw; };
}  // namespace half
}  // namespace cudaopt
static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2 && sizeof(__half2) == 4 && alignof(__half2) == 4 &&
                  sizeof(__half2_raw) == 4,
              "CUDA's sizes and alignments");

/* ── conversions ── */
#define CUDAOPT_NARROW(name, T, mode)                                                                      \
    inline T name(double v) {                                                                            \
        return T::from_bits(::cudaopt::half::encode<T::mantissa_bits, T::exponent_bits>(v, ::cudaopt::half::Round::mode)); \
    }
#define CUDAOPT_NARROW_ALL(prefix, T)                                                    \
    CUDAOPT_NARROW(prefix, T, rn) CUDAOPT_NARROW(prefix##_rn, T, rn) CUDAOPT_NARROW(prefix##_rz, T, rz) \
    CUDAOPT_NARROW(prefix##_rd, T, rd) CUDAOPT_NARROW(prefix##_ru, T, ru)
// float widens to double exactly, so one rounding from double is the float's own rounding
CUDAOPT_NARROW_ALL(__float2half, __half)
CUDAOPT_NARROW_ALL(__double2half, __half)
CUDAOPT_NARROW_ALL(__float2bfloat16, __nv_bfloat16)
CUDAOPT_NARROW_ALL(__double2bfloat16, __nv_bfloat16)
CUDAOPT_NARROW(__int2half_rn, __half, rn)
CUDAOPT_NARROW(__int2bfloat16_rn, __nv_bfloat16, rn)
#undef CUDAOPT_NARROW_ALL
#undef CUDAOPT_NARROW
inline float __half2float(__half h) { return float(h); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline int __half2int_rz(__half h) { return std::isnan(float(h)) ? 0 : static_cast<int>(float(h)); }
inline int __bfloat162int_rz(__nv_bfloat16 h) { return std::isnan(float(h)) ? 0 : static_cast<int>(float(h)); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __ushort_as_half(unsigned short b) { return __half::from_bits(b); }
inline __half __short_as_half(short b) { return __half::from_bits(static_cast<unsigned short>(b)); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return static_cast<short>(h.__x); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { return __nv_bfloat16::from_bits(b); }
inline __nv_bfloat16 __short_as_bfloat16(short b) { return __nv_bfloat16::from_bits(static_cast<unsigned short>(b)); }

// The pair API, once per type (CUDA names each function after its type).
#define CUDAOPT_PAIR_API(T, P, floats2, float2p, float22, p2float2, halves2, dup)    \
    inline P floats2(float a, float b) { return {T(a), T(b)}; }                      \
    inline P float2p(float a) { return {T(a), T(a)}; }                               \
    inline P float22(float2 v) { return {T(v.x), T(v.y)}; }                          \
    inline float2 p2float2(P v) { return {float(v.x), float(v.y)}; }                 \
    inline P halves2(T a, T b) { return {a, b}; }                                    \
    inline P dup(T a) { return {a, a}; }
CUDAOPT_PAIR_API(__half, __half2, __floats2half2_rn, __float2half2_rn, __float22half2_rn, __half22float2,
                 __halves2half2, __half2half2)
CUDAOPT_PAIR_API(__nv_bfloat16, __nv_bfloat162, __floats2bfloat162_rn, __float2bfloat162_rn, __float22bfloat162_rn,
                 __bfloat1622float2, __halves2bfloat162, __bfloat162bfloat162)
#undef CUDAOPT_PAIR_API
inline __half __low2half(__half2 v) { return v.x; }
inline __half __high2half(__half2 v) { return v.y; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
template <class T> inline float __low2float(::cudaopt::half::Pair<T> v) { return float(v.x); }
template <class T> inline float __high2float(::cudaopt::half::Pair<T> v) { return float(v.y); }

/* ── arithmetic, comparisons and math: one set of names for both types, as CUDA overloads them ── */
namespace cudaopt {
namespace half {
CUDAOPT_HALF_T inline CUDAOPT_HALF fma(CUDAOPT_HALF a, CUDAOPT_HALF b, CUDAOPT_HALF c) {
    const double product = static_cast<double>(float(a)) * static_cast<double>(float(b));  // exact
    return CUDAOPT_HALF::from_bits(encode<M, E>(round_to_odd_sum(product, float(c)), Round::rn));
}
// CUDA's __hmax/__hmin return the other operand when one is NaN; the _nan forms return NaN.
CUDAOPT_HALF_T inline CUDAOPT_HALF max(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(std::fmax(float(a), float(b))); }
CUDAOPT_HALF_T inline CUDAOPT_HALF min(CUDAOPT_HALF a, CUDAOPT_HALF b) { return CUDAOPT_HALF(std::fmin(float(a), float(b))); }
CUDAOPT_HALF_T inline CUDAOPT_HALF max_nan(CUDAOPT_HALF a, CUDAOPT_HALF b) {
    return std::isnan(float(a)) || std::isnan(float(b)) ? CUDAOPT_HALF::from_bits(0x7FFF) : max(a, b);
}
CUDAOPT_HALF_T inline CUDAOPT_HALF min_nan(CUDAOPT_HALF a, CUDAOPT_HALF b) {
    return std::isnan(float(a)) || std::isnan(float(b)) ? CUDAOPT_HALF::from_bits(0x7FFF) : min(a, b);
}
}  // namespace half
}  // namespace cudaopt

#define CUDAOPT_H ::cudaopt::half::CUDAOPT_HALF
CUDAOPT_HALF_T inline CUDAOPT_H __hadd(CUDAOPT_H a, CUDAOPT_H b) { return a + b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hsub(CUDAOPT_H a, CUDAOPT_H b) { return a - b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hmul(CUDAOPT_H a, CUDAOPT_H b) { return a * b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hdiv(CUDAOPT_H a, CUDAOPT_H b) { return a / b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hadd_rn(CUDAOPT_H a, CUDAOPT_H b) { return a + b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hsub_rn(CUDAOPT_H a, CUDAOPT_H b) { return a - b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hmul_rn(CUDAOPT_H a, CUDAOPT_H b) { return a * b; }
CUDAOPT_HALF_T inline CUDAOPT_H __hfma(CUDAOPT_H a, CUDAOPT_H b, CUDAOPT_H c) { return ::cudaopt::half::fma(a, b, c); }
CUDAOPT_HALF_T inline CUDAOPT_H __hneg(CUDAOPT_H a) { return -a; }
CUDAOPT_HALF_T inline CUDAOPT_H __habs(CUDAOPT_H a) { return CUDAOPT_H::from_bits(a.__x & 0x7FFF); }
CUDAOPT_HALF_T inline CUDAOPT_H __hmax(CUDAOPT_H a, CUDAOPT_H b) { return ::cudaopt::half::max(a, b); }
CUDAOPT_HALF_T inline CUDAOPT_H __hmin(CUDAOPT_H a, CUDAOPT_H b) { return ::cudaopt::half::min(a, b); }
CUDAOPT_HALF_T inline CUDAOPT_H __hmax_nan(CUDAOPT_H a, CUDAOPT_H b) { return ::cudaopt::half::max_nan(a, b); }
CUDAOPT_HALF_T inline CUDAOPT_H __hmin_nan(CUDAOPT_H a, CUDAOPT_H b) { return ::cudaopt::half::min_nan(a, b); }
CUDAOPT_HALF_T inline bool __heq(CUDAOPT_H a, CUDAOPT_H b) { return a == b; }
CUDAOPT_HALF_T inline bool __hne(CUDAOPT_H a, CUDAOPT_H b) { return a != b; }
CUDAOPT_HALF_T inline bool __hlt(CUDAOPT_H a, CUDAOPT_H b) { return a < b; }
CUDAOPT_HALF_T inline bool __hle(CUDAOPT_H a, CUDAOPT_H b) { return a <= b; }
CUDAOPT_HALF_T inline bool __hgt(CUDAOPT_H a, CUDAOPT_H b) { return a > b; }
CUDAOPT_HALF_T inline bool __hge(CUDAOPT_H a, CUDAOPT_H b) { return a >= b; }
CUDAOPT_HALF_T inline bool __hisnan(CUDAOPT_H a) { return std::isnan(float(a)); }
CUDAOPT_HALF_T inline int __hisinf(CUDAOPT_H a) { return std::isinf(float(a)) ? (a.__x & 0x8000 ? -1 : 1) : 0; }
#define CUDAOPT_HALF_MATH(name, expr) \
    CUDAOPT_HALF_T inline CUDAOPT_H name(CUDAOPT_H a) { const float x = float(a); return CUDAOPT_H(expr); }
CUDAOPT_HALF_MATH(hsqrt, std::sqrt(x))
CUDAOPT_HALF_MATH(hrsqrt, 1.0f / std::sqrt(x))
CUDAOPT_HALF_MATH(hrcp, 1.0f / x)
CUDAOPT_HALF_MATH(hexp, std::exp(x))
CUDAOPT_HALF_MATH(hexp2, std::exp2(x))
CUDAOPT_HALF_MATH(hlog, std::log(x))
CUDAOPT_HALF_MATH(hlog2, std::log2(x))
CUDAOPT_HALF_MATH(hsin, std::sin(x))
CUDAOPT_HALF_MATH(hcos, std::cos(x))
CUDAOPT_HALF_MATH(htanh, std::tanh(x))
CUDAOPT_HALF_MATH(hfloor, std::floor(x))
CUDAOPT_HALF_MATH(hceil, std::ceil(x))
CUDAOPT_HALF_MATH(htrunc, std::trunc(x))
CUDAOPT_HALF_MATH(hrint, std::nearbyint(x))
#undef CUDAOPT_HALF_MATH

#define CUDAOPT_P ::cudaopt::half::Pair<T>
template <class T> inline CUDAOPT_P __hadd2(CUDAOPT_P a, CUDAOPT_P b) { return a + b; }
template <class T> inline CUDAOPT_P __hsub2(CUDAOPT_P a, CUDAOPT_P b) { return a - b; }
template <class T> inline CUDAOPT_P __hmul2(CUDAOPT_P a, CUDAOPT_P b) { return a * b; }
template <class T> inline CUDAOPT_P __h2div(CUDAOPT_P a, CUDAOPT_P b) { return a / b; }
template <class T> inline CUDAOPT_P __hfma2(CUDAOPT_P a, CUDAOPT_P b, CUDAOPT_P c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
template <class T> inline CUDAOPT_P __hneg2(CUDAOPT_P a) { return -a; }
template <class T> inline CUDAOPT_P __habs2(CUDAOPT_P a) { return {__habs(a.x), __habs(a.y)}; }
template <class T> inline CUDAOPT_P __hmax2(CUDAOPT_P a, CUDAOPT_P b) { return {__hmax(a.x, b.x), __hmax(a.y, b.y)}; }
template <class T> inline CUDAOPT_P __hmin2(CUDAOPT_P a, CUDAOPT_P b) { return {__hmin(a.x, b.x), __hmin(a.y, b.y)}; }
template <class T> inline CUDAOPT_P h2sqrt(CUDAOPT_P a) { return {hsqrt(a.x), hsqrt(a.y)}; }

/* ── atomics (a compare-exchange loop per 16-bit value, as CUDA documents __half2's) and warp shuffles ── */
CUDAOPT_HALF_T inline CUDAOPT_H atomicAdd(CUDAOPT_H* address, CUDAOPT_H val) {
    return ::cudaopt::dev::atomic_update(address, [val](CUDAOPT_H old) { return old + val; });
}
template <class T> inline CUDAOPT_P atomicAdd(CUDAOPT_P* address, CUDAOPT_P val) {
    return {atomicAdd(&address->x, val.x), atomicAdd(&address->y, val.y)};
}
namespace cudaopt {
namespace dev {
#define CUDAOPT_16 template <class T, typename std::enable_if<::cudaopt::half::is_16bit<T>::value, int>::type = 0> inline T
CUDAOPT_16 shfl_sync(int line, unsigned int mask, T var, int src_lane, int width = 32) {
    return shuffle(line, mask, var, ShflMode::idx, static_cast<unsigned int>(src_lane), width, "__shfl_sync");
}
CUDAOPT_16 shfl_up_sync(int line, unsigned int mask, T var, unsigned int delta, int width = 32) {
    return shuffle(line, mask, var, ShflMode::up, delta, width, "__shfl_up_sync");
}
CUDAOPT_16 shfl_down_sync(int line, unsigned int mask, T var, unsigned int delta, int width = 32) {
    return shuffle(line, mask, var, ShflMode::down, delta, width, "__shfl_down_sync");
}
CUDAOPT_16 shfl_xor_sync(int line, unsigned int mask, T var, int lane_mask, int width = 32) {
    return shuffle(line, mask, var, ShflMode::bfly, static_cast<unsigned int>(lane_mask), width, "__shfl_xor_sync");
}
#undef CUDAOPT_16
}  // namespace dev
}  // namespace cudaopt
#undef CUDAOPT_P
#undef CUDAOPT_H
#undef CUDAOPT_HALF
#undef CUDAOPT_HALF_T

#endif  // CUDAOPT_CPU_HALF_H
