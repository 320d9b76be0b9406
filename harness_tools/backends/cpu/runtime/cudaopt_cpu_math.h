/* cudaopt_cpu_math.h: math functions, min/max, fast-math and rounding intrinsics, conversions, cache-hinted memory access.
 * Part of cudaopt_cpu.h, which includes it in order: include cudaopt_cpu.h, not this file. */
#ifndef CUDAOPT_CPU_MATH_H
#define CUDAOPT_CPU_MATH_H

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


#endif  // CUDAOPT_CPU_MATH_H
