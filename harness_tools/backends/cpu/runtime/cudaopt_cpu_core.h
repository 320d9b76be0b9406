/* The internal C++ API between the device-side header (cudaopt_cpu.h) and the runtime library
 * (cudaopt_cpu_runtime.cpp → libcudaopt_cpu.so). Kernel code never calls these directly: the CUDA
 * names in cudaopt_cpu.h expand to them, passing __LINE__ so every report names the candidate's line.
 *
 * Execution model: a block runs on one OS thread; its CUDA threads are fibers (user-mode contexts)
 * that switch only at barriers and warp operations. The scheduler *counts* arrivals: a barrier that
 * some threads can never reach, threads waiting at different barriers, a warp operation whose mask
 * names an exited lane, or no runnable fiber left is a kernel error with the source line(s), never a
 * silent pass. Blocks of a grid run in parallel on several OS threads, so atomics must be real.
 */
#ifndef CUDAOPT_CPU_CORE_H
#define CUDAOPT_CPU_CORE_H

#include "cudaopt_cpu_abi.h"

namespace cudaopt {
namespace rt {

struct Index3 {
    unsigned int x, y, z;
};

/* The running CUDA thread. Valid only inside a kernel body. */
struct ThreadContext {
    Index3 thread_idx;
    Index3 block_idx;
    Index3 block_dim;
    Index3 grid_dim;
    unsigned int linear_tid;   /* x + block_dim.x * (y + block_dim.y * z) */
    unsigned int lane;         /* linear_tid % 32 */
    unsigned int warp;         /* linear_tid / 32 */
    void* dynamic_shared;      /* this block's extern __shared__ memory (16-byte aligned, poisoned 0xFF) */
};

/* pure lets g++ reuse the pointer between synchronisation calls (threadIdx in a loop costs no call);
 * this is sound because the running fiber changes only inside syncthreads/warp_exchange/syncwarp,
 * which g++ must assume write memory. */
ThreadContext* current() __attribute__((pure));

/* Block barrier. op: 0 plain (returns 0), 1 count, 2 and, 3 or (returns the reduction of pred over
 * the block's threads). Every live thread of the block must arrive at the same call (same line). */
int syncthreads(int line, int op, int pred);

/* Warp rendezvous at one program point. Every lane named in `mask` (which must include the caller)
 * calls this; it returns once all of them have arrived, with a pointer to 32 slots holding the value
 * each lane deposited (slots of lanes outside mask are unspecified; lanes named in mask that do not
 * exist, past the end of a partial last warp, are ignored and their slots hold 0). The pointer stays
 * valid until the caller's next warp operation. `what` names the operation for messages (e.g.
 * "__shfl_xor_sync"). */
const unsigned long long* warp_exchange(unsigned int mask, unsigned long long value, int line, const char* what);

/* Warp barrier without data (__syncwarp). */
void syncwarp(unsigned int mask, int line);

/* Mask of the lanes of the caller's warp that have not exited. */
unsigned int active_mask();

/* Abort the whole launch with CUDAOPT_KERNEL_ERROR and this message (printf-style), naming the
 * current block and thread. Used for __trap, failed assert and misuse detected in the header. */
[[noreturn]] void kernel_error(int line, const char* format, ...);

/* Serialises printf from concurrently running blocks. */
int device_printf(const char* format, ...);

}  // namespace rt
}  // namespace cudaopt

#endif
