/* Race-check builds only (-DCUDAOPT_TSAN; see harness_tools/backends/cpu_racecheck.py): the CUDA execution
 * model, told to ThreadSanitizer. This file is empty in default builds.
 *
 * The runtime stays uninstrumented; only the kernel and the generated main are compiled with
 * -fsanitize=thread. What TSan is told:
 *   - every CUDA thread is a TSan fiber, and switching between fibers orders nothing;
 *   - barriers and warp operations order the accesses of the threads taking part (sync objects: two per
 *     block for barriers, by generation parity, and one per warp group; heap bytes that are freed when
 *     done, which makes TSan drop their clocks, so nothing leaks into an unrelated barrier or group);
 *   - the kernel's atomics order what C++ seq_cst atomics order (TSan sees them directly);
 *   - blocks of one pool thread run one after another, and each starts after its predecessor ended;
 *     blocks of different pool threads are never ordered. Block (x,y,z) runs on pool thread
 *     (x + y + z) % workers, so which pairs of blocks can be seen racing (neighbours along any grid
 *     dimension, among others) does not depend on timing.
 * Each pool thread keeps one fiber per thread slot for the whole run: creating a fiber costs GCC 12's
 * TSan a 128 KiB vector clock and ~0.6 MiB of trace headers in fresh memory (0.5-2 ms), far too much to
 * pay per block. Since a pool thread's blocks are ordered anyway, reusing its fibers, its TLS (static
 * __shared__), its dynamic shared memory and its fiber stacks can never look like a race.
 */
#ifdef CUDAOPT_TSAN

#include "cudaopt_cpu_runtime_internal.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <link.h>

namespace cudaopt {
namespace rt {
namespace detail {

namespace {

/* The executable's PT_TLS size: its first dl_iterate_phdr entry is the executable itself. */
int executable_tls(dl_phdr_info* info, size_t, void* out) {
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_TLS) *static_cast<size_t*>(out) = info->dlpi_phdr[i].p_memsz;
    return 1;
}

}  // namespace

void tsan_attach_worker(Worker* w) {
    w->tsan_main = __tsan_get_current_fiber();
    w->tsan_block = static_cast<char*>(malloc(2));
    /* where this thread's static __shared__ (thread_local) and dynamic shared memory live, so that the
     * report parser can name the memory of a racing address */
    size_t size = 0;
    dl_iterate_phdr(executable_tls, &size);
    void* self = dlopen(nullptr, RTLD_LAZY);
    void* tls = nullptr;
    if (self && size) dlinfo(self, RTLD_DI_TLS_DATA, &tls);
    if (self) dlclose(self);
    fprintf(stderr, "cudaopt-racecheck: worker %u tls %p %zu shared-end %p\n", w->index, tls, size,
            static_cast<void*>(w->shared_end));
}

/* Block (x,y,z) runs on pool thread (x + y + z) % workers: neighbours along every grid dimension are on
 * different pool threads, hence unordered, whatever the grid's shape. Returns total_blocks when done. */
unsigned long long tsan_next_block(Worker* w) {
    const Launch& L = g_launch;
    for (unsigned long long b = w->tsan_cursor; b < L.total_blocks; ++b) {
        const unsigned long long x = b % L.grid.x, y = b / L.grid.x % L.grid.y, z = b / L.grid.x / L.grid.y;
        if ((x + y + z) % L.workers == w->index) {
            w->tsan_cursor = b + 1;
            ++w->tsan_taken;
            return b;
        }
    }
    w->tsan_cursor = L.total_blocks;
    return L.total_blocks;
}

void tsan_begin_block(Worker* w) {
    w->tsan_barrier = static_cast<char*>(malloc(2));
    char name[112];
    for (unsigned i = 0; i < w->s.n; ++i) {
        Fiber& f = w->fiber[i];
        if (!f.tsan) f.tsan = __tsan_create_fiber(0);  /* by the pool thread: after the host's writes */
        const Index3& b = f.ctx.block_idx;
        const Index3& t = f.ctx.thread_idx;
        snprintf(name, sizeof name, "block (%u,%u,%u) thread (%u,%u,%u) worker %u", b.x, b.y, b.z, t.x, t.y, t.z,
                 w->index);
        __tsan_set_fiber_name(f.tsan, name);
    }
}

void tsan_end_block(Worker* w) {
    for (unsigned wi = 0; wi * 32 < w->s.n; ++wi)
        for (int r = 0; r < 32; ++r) tsan_row_freed(w->warps[wi], r);
    free(w->tsan_barrier);
    w->tsan_barrier = nullptr;
}

void tsan_row_taken(Warp& wp, int row) { wp.row_sync[row] = malloc(1); }

void tsan_row_freed(Warp& wp, int row) {
    free(wp.row_sync[row]);
    wp.row_sync[row] = nullptr;
}

}  // namespace detail
}  // namespace rt
}  // namespace cudaopt

#endif
