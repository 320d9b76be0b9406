/* cudaopt_cpu_sync.h: atomics, block barriers and warp operations.
 * Part of cudaopt_cpu.h, which includes it in order: include cudaopt_cpu.h, not this file. */
#ifndef CUDAOPT_CPU_SYNC_H
#define CUDAOPT_CPU_SYNC_H

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


#endif  // CUDAOPT_CPU_SYNC_H
