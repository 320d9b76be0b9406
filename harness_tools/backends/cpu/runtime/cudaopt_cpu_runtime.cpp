/* The cpu backend's runtime (libcudaopt_cpu.so): guarded buffers, the launch, its thread pool and the
 * small parts of the core API. The scheduler lives in cudaopt_cpu_fibers.cpp, fault handling in
 * cudaopt_cpu_faults.cpp; cudaopt_cpu_runtime_internal.h holds what they share.
 *
 * A launch: the calling thread validates the configuration and wakes os_threads persistent pool
 * threads; each takes blocks from an atomic counter and runs them (threads as fibers, or one after
 * another when the source has no barrier or warp operation). The first error (kernel error, fault)
 * wins, cancels the launch, and is returned once every pool thread has stopped.
 */
#include "cudaopt_cpu_runtime_internal.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

namespace cudaopt {
namespace rt {
namespace detail {

/* ======================================================================================= basics */

Launch g_launch{};
CUDAOPT_TLS Worker* tls_worker = nullptr;
CUDAOPT_TLS ThreadContext* tls_ctx = nullptr;

size_t page_size() {
    static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

void Message::vadd(const char* format, va_list ap) {
    if (len + 1 >= sizeof text) return;
    int n = vsnprintf(text + len, sizeof text - len, format, ap);
    if (n > 0) len += static_cast<size_t>(n);
    if (len >= sizeof text) len = sizeof text - 1;
}

void Message::add(const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    vadd(format, ap);
    va_end(ap);
}

void Message::add_lanes(unsigned mask) {
    const char* sep = "";
    for (int lo = 0; lo < 32; ++lo) {
        if (!(mask >> lo & 1u)) continue;
        int hi = lo;
        while (hi < 31 && (mask >> (hi + 1) & 1u)) ++hi;
        if (hi == lo) add("%s%d", sep, lo);
        else add("%s%d-%d", sep, lo, hi);
        sep = ",";
        lo = hi;
    }
}

Index3 thread_of(unsigned linear) {
    const Index3& b = g_launch.block;
    return Index3{linear % b.x, linear / b.x % b.y, linear / (b.x * b.y)};
}

void add_where(Message& m, const ThreadContext& t) {
    m.add(" in block (%u,%u,%u) thread (%u,%u,%u)", t.block_idx.x, t.block_idx.y, t.block_idx.z,
          t.thread_idx.x, t.thread_idx.y, t.thread_idx.z);
}

char* map_guarded(size_t usable, size_t guard) {
    void* p = mmap(nullptr, guard + usable, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (guard && mprotect(p, guard, PROT_NONE) != 0) {
        munmap(p, guard + usable);
        return nullptr;
    }
    return static_cast<char*>(p);
}

/* ======================================================================================= errors */

namespace {
pthread_mutex_t g_error_lock = PTHREAD_MUTEX_INITIALIZER;
}

void record_error(int status, const char* text) {
    tsan_ignore_accesses(true);
    pthread_mutex_lock(&g_error_lock);
    if (g_launch.status == CUDAOPT_OK) {
        g_launch.status = status;
        snprintf(g_launch.error, sizeof g_launch.error, "%s", text);
    }
    pthread_mutex_unlock(&g_error_lock);
    tsan_ignore_accesses(false);
    g_launch.cancel.store(1, std::memory_order_relaxed);
}

/* Fibers are simply abandoned (their stacks are reused by the next block); without fibers the thread
 * body runs on the worker stack, below run_launch's sigsetjmp, so a longjmp unwinds it. */
void fail(Worker* w, int status) {
    w->in_kernel = 0;
    record_error(status, w->msg.text);
    w->block_failed = true;
    if (w->fibers) leave_block(w);
    siglongjmp(w->jmp, 2);
}

/* ================================================================================ block runners */

namespace {

bool run_block_flat(Worker* w, Index3 block_idx) {
    const Launch& L = g_launch;
    ThreadContext& t = w->flat;
    t.block_idx = block_idx;
    t.block_dim = L.block;
    t.grid_dim = L.grid;
    t.dynamic_shared = w->shared;
    tls_ctx = &t;
    unsigned tid = 0;
    for (unsigned z = 0; z < L.block.z; ++z)
        for (unsigned y = 0; y < L.block.y; ++y)
            for (unsigned x = 0; x < L.block.x; ++x, ++tid) {
                t.thread_idx = Index3{x, y, z};
                t.linear_tid = tid;
                t.lane = tid & 31u;
                t.warp = tid >> 5;
                w->in_kernel = 1;
                L.body(L.args);
                w->in_kernel = 0;
                if (L.cancel.load(std::memory_order_relaxed)) return false;
            }
    return true;
}

void run_blocks(Worker* w) {
    Launch& L = g_launch;
    const unsigned long long gxy = static_cast<unsigned long long>(L.grid.x) * L.grid.y;
    for (;;) {
        if (L.cancel.load(std::memory_order_relaxed)) return;
#ifdef CUDAOPT_TSAN
        unsigned long long b = tsan_next_block(w);
#else
        unsigned long long b = L.next_block.fetch_add(1, std::memory_order_relaxed);
#endif
        if (b >= L.total_blocks) return;
        Index3 idx{static_cast<unsigned>(b % L.grid.x), static_cast<unsigned>(b / L.grid.x % L.grid.y),
                   static_cast<unsigned>(b / gxy)};
        tsan_block_start(w);
        memset(w->shared, 0xFF, L.dynamic_shared);  /* shared memory starts as garbage on a GPU */
        tsan_block_filled(w);
        if (!(L.fibers ? run_block_fibers(w, idx) : run_block_flat(w, idx))) return;
    }
}

/* One pool thread's share of a launch. Faults (from the signal handler) and fiber-less kernel errors
 * siglongjmp back here; fault_sig tells them apart. */
void run_launch(Worker* w) {
    w->fault_sig = 0;
    tsan_launch_start(w);
    reset_fpu(w);  /* a previous kernel may have changed rounding or flush-to-zero */
    w->fibers = g_launch.fibers;
    w->shared = w->shared_end - round_up(g_launch.dynamic_shared, 16);
    if (sigsetjmp(w->jmp, 1) == 0) {
        run_blocks(w);
    } else if (w->fault_sig) {
        report_fault(w);
    }
    w->in_kernel = 0;
    w->cur = nullptr;
    tls_ctx = nullptr;
}

/* ================================================================================== thread pool */

struct Pool {
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t start = PTHREAD_COND_INITIALIZER;
    pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
    unsigned long long gen = 0;     /* bumped per launch */
    unsigned active = 0;            /* workers [0, active) take part in the current launch */
    unsigned done = 0;
    unsigned size = 0;
    Worker* workers[kMaxOsThreads] = {};
};

Pool g_pool;
pthread_mutex_t g_launch_lock = PTHREAD_MUTEX_INITIALIZER;  /* one launch at a time */

void* worker_main(void* arg) {
    Worker* w = static_cast<Worker*>(arg);
    tls_worker = w;
    install_alt_stack();
    tsan_attach_worker(w);
    sigset_t faults;  /* created with everything blocked: only synchronous faults come here */
    sigemptyset(&faults);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigaddset(&faults, sig);
    pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);

    pthread_mutex_lock(&g_pool.lock);
    for (;;) {
        while (w->seen_gen == g_pool.gen) pthread_cond_wait(&g_pool.start, &g_pool.lock);
        w->seen_gen = g_pool.gen;
        if (w->index >= g_pool.active) continue;
        pthread_mutex_unlock(&g_pool.lock);
        run_launch(w);
        pthread_mutex_lock(&g_pool.lock);
        if (++g_pool.done == g_pool.active) pthread_cond_signal(&g_pool.finished);
    }
    return nullptr;
}

/* A forked child has none of the pool threads: start from scratch there (the old workers leak). */
void forget_pool_in_child() {
    g_pool.~Pool();
    new (&g_pool) Pool();
    g_launch_lock = PTHREAD_MUTEX_INITIALIZER;
    g_error_lock = PTHREAD_MUTEX_INITIALIZER;
}

bool start_worker(unsigned index, Message& why) {
    /* mmap'ed: most of a Worker (fiber and warp tables) stays untouched, hence costs nothing */
    void* mem = mmap(nullptr, sizeof(Worker), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Worker* w = mem == MAP_FAILED ? nullptr : new (mem) Worker;
    char* stack = map_guarded(kWorkerStack, kStackGuard);
    char* shared = map_guarded(round_up(kMaxDynamicShared, page_size()) + page_size(), 0);
    if (!w || !stack || !shared) {
        why.add("cannot allocate memory for pool thread %u", index);
        return false;
    }
    w->index = index;
    for (unsigned i = 0; i < kMaxThreads; ++i) w->fiber[i].context.uc = &w->ucs[i];
    w->main.uc = &w->ucs[kMaxThreads];
    w->scratch.uc = &w->ucs[kMaxThreads + 1];
    w->stack_lo = stack + kStackGuard;
    /* the page after dynamic shared memory is a guard: overruns of extern __shared__ fault */
    w->shared_end = shared + round_up(kMaxDynamicShared, page_size());
    mprotect(w->shared_end, page_size(), PROT_NONE);
    w->seen_gen = g_pool.gen;

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, w->stack_lo, kWorkerStack);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);  /* asynchronous signals stay with the host's threads */
    int rc = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        why.add("cannot start pool thread %u: %s", index, strerror(rc));
        return false;
    }
    g_pool.workers[index] = w;
    g_pool.size = index + 1;
    return true;
}

/* ======================================================================================= launch */

bool validate(const cudaopt_launch_config* c, cudaopt_thread_body body, Message& why) {
    const unsigned* b = c->block;
    const unsigned* g = c->grid;
    if (!body) return why.add("no thread body"), false;
    if (!b[0] || !b[1] || !b[2])
        return why.add("block (%u,%u,%u): every block dimension must be at least 1", b[0], b[1], b[2]), false;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64)
        return why.add("block (%u,%u,%u) exceeds the per-dimension limits (1024,1024,64)", b[0], b[1], b[2]), false;
    unsigned long long threads = 1ull * b[0] * b[1] * b[2];
    if (threads > kMaxThreads)
        return why.add("block (%u,%u,%u) has %llu threads; at most 1024 are allowed per block", b[0], b[1],
                       b[2], threads), false;
    if (!g[0] || !g[1] || !g[2])
        return why.add("grid (%u,%u,%u): every grid dimension must be at least 1", g[0], g[1], g[2]), false;
    if (g[0] > 0x7FFFFFFFu || g[1] > 65535 || g[2] > 65535)
        return why.add("grid (%u,%u,%u) exceeds the limits (2147483647,65535,65535)", g[0], g[1], g[2]), false;
    if (c->dynamic_shared > kMaxDynamicShared)
        return why.add("%zu bytes of dynamic shared memory requested; at most %zu (227 KiB) per block",
                       c->dynamic_shared, kMaxDynamicShared), false;
    if (c->os_threads < 1) return why.add("os_threads must be at least 1, got %d", c->os_threads), false;
    if (c->buffer_count < 0 || (c->buffer_count > 0 && !c->buffers))
        return why.add("invalid buffer table (%d buffers)", c->buffer_count), false;
#ifdef CUDAOPT_TSAN
    /* without fibers a block is one TSan thread: races between its threads would be invisible */
    if (!c->use_fibers) return why.add("race-check builds need use_fibers=1"), false;
#endif
    return true;
}

bool handlers_installed = false;

/* Every fiber stack with its guard is two VMAs, and the kernel caps VMAs per process
 * (vm.max_map_count, 65530 by default): 64 pool threads with 1024-thread blocks would need 131072.
 * Fiber launches therefore use only as many pool threads as a quarter of that cap allows. */
size_t stack_budget() {
    static size_t budget = 0;
    if (!budget) {
        unsigned long cap = 65530;
        if (FILE* f = fopen("/proc/sys/vm/max_map_count", "r")) {
            if (fscanf(f, "%lu", &cap) != 1) cap = 65530;
            fclose(f);
        }
        budget = cap / 8 > kMaxThreads ? cap / 8 : kMaxThreads;  /* stacks, i.e. a quarter of the VMAs */
    }
    return budget;
}

unsigned fiber_workers(unsigned want, unsigned threads) {
    size_t total = 0;
    for (unsigned i = 0; i < g_pool.size; ++i) total += g_pool.workers[i]->stacks;
    unsigned m = 0;
    for (; m < want; ++m) {
        const unsigned have = m < g_pool.size ? g_pool.workers[m]->stacks : 0;
        const size_t extra = threads > have ? threads - have : 0;
        if (m > 0 && total + extra > stack_budget()) break;
        total += extra;
    }
    return m;
}

int launch_locked(const cudaopt_launch_config* c, cudaopt_thread_body body, void** args, Message& why) {
    Launch& L = g_launch;
    L.grid = Index3{c->grid[0], c->grid[1], c->grid[2]};
    L.block = Index3{c->block[0], c->block[1], c->block[2]};
    L.total_blocks = 1ull * L.grid.x * L.grid.y * L.grid.z;
    unsigned want = static_cast<unsigned>(c->os_threads);
    if (want > kMaxOsThreads) want = kMaxOsThreads;
    if (want > L.total_blocks) want = static_cast<unsigned>(L.total_blocks);

    L.threads = L.block.x * L.block.y * L.block.z;
    if (c->use_fibers) want = fiber_workers(want, L.threads);
#ifdef CUDAOPT_TSAN
    L.workers = want;
#endif

    if (!handlers_installed) {
        init_switch();
        install_fault_handlers();
        pthread_atfork(nullptr, nullptr, forget_pool_in_child);
        handlers_installed = true;
    }
    while (g_pool.size < want)
        if (!start_worker(g_pool.size, why)) return CUDAOPT_CRASH;

    L.config = c;
    L.body = body;
    L.args = args;
    L.dynamic_shared = c->dynamic_shared;
    L.fibers = c->use_fibers != 0;
    L.next_block.store(0);
    L.cancel.store(0);
    L.status = CUDAOPT_OK;
    L.error[0] = '\0';

    pthread_mutex_lock(&g_pool.lock);
    g_pool.active = want;
    g_pool.done = 0;
    ++g_pool.gen;
    pthread_cond_broadcast(&g_pool.start);
    while (g_pool.done < g_pool.active) pthread_cond_wait(&g_pool.finished, &g_pool.lock);
    pthread_mutex_unlock(&g_pool.lock);

    why.add("%s", L.error);
    L.config = nullptr;
    return L.status;
}

void copy_error(const cudaopt_launch_config* c, const Message& m) {
    if (!c->error || !c->error_size) return;
    size_t n = m.len < c->error_size - 1 ? m.len : c->error_size - 1;
    memcpy(c->error, m.text, n);
    c->error[n] = '\0';
}

}  // namespace
}  // namespace detail

/* ============================================================================ core API (device) */

using namespace detail;

ThreadContext* current() { return tls_ctx; }

void kernel_error(int line, const char* format, ...) {
    Worker* w = tls_worker;
    va_list ap;
    va_start(ap, format);
    if (!w || !tls_ctx) {  /* not inside a kernel: a bug in the caller, say so loudly */
        fprintf(stderr, "cudaopt: kernel_error outside a kernel at kernel.cu(%d): ", line);
        vfprintf(stderr, format, ap);
        fputc('\n', stderr);
        abort();
    }
    w->in_kernel = 0;
    Message& m = w->msg;
    m.reset();
    m.add("kernel.cu(%d): ", line);
    m.vadd(format, ap);
    va_end(ap);
    add_where(m, *tls_ctx);
    fail(w, CUDAOPT_KERNEL_ERROR);
}

namespace {
pthread_mutex_t g_printf_lock = PTHREAD_MUTEX_INITIALIZER;
}

int device_printf(const char* format, ...) {
    Worker* w = tls_worker;
    sig_atomic_t was_in_kernel = w ? w->in_kernel : 0;
    if (w) w->in_kernel = 0, w->in_printf = 1;  /* a fault inside stdio must not be recovered from */
    va_list ap;
    va_start(ap, format);
    tsan_ignore_sync(true);  /* race checks: printing must not order the threads that print */
    pthread_mutex_lock(&g_printf_lock);
    int n = vprintf(format, ap);
    fflush(stdout);
    pthread_mutex_unlock(&g_printf_lock);
    tsan_ignore_sync(false);
    va_end(ap);
    if (w) w->in_printf = 0, w->in_kernel = was_in_kernel;
    return n;
}

}  // namespace rt
}  // namespace cudaopt

/* ================================================================================ C ABI (Python) */

using namespace cudaopt::rt::detail;

namespace {
/* `word` (little-endian) tiled from `p`: the same tiling the Python side checks (contract.tail_pattern). */
void fill_word(char* p, size_t n, uint32_t word) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(word >> (8 * (i % 4)));
}
}  // namespace

extern "C" int cudaopt_buffer_alloc(cudaopt_buffer* buf, const char* name, size_t size, size_t alignment,
                                    uint32_t fill) {
    if (!buf) return EINVAL;
    memset(buf, 0, sizeof *buf);
    const size_t page = page_size();
    if (alignment < 16 || alignment > page || (alignment & (alignment - 1))) return EINVAL;
    if (size > (SIZE_MAX >> 2)) return ENOMEM;
    const size_t span = round_up(size, alignment);  /* data is aligned and ends < alignment bytes before the guard */
    const size_t inner = round_up(span, page);
    const size_t total = inner + 2 * page;
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return errno ? errno : ENOMEM;
    char* base = static_cast<char*>(p);
    char* back_guard = base + page + inner;
    if (mprotect(base, page, PROT_NONE) != 0 || mprotect(back_guard, page, PROT_NONE) != 0) {
        int err = errno;
        munmap(p, total);
        return err;
    }
    char* data = back_guard - span;
    buf->name = name;
    buf->data = data;
    buf->size = size;
    buf->front_pad = static_cast<size_t>(data - (base + page));
    buf->slack = span - size;
    buf->mapping = p;
    buf->mapping_size = total;
    fill_word(base + page, buf->front_pad, fill);
    fill_word(data + size, buf->slack, fill);
    return 0;
}

extern "C" void cudaopt_buffer_free(cudaopt_buffer* buf) {
    if (!buf || !buf->mapping) return;
    munmap(buf->mapping, buf->mapping_size);
    buf->mapping = nullptr;
    buf->data = nullptr;
    buf->mapping_size = 0;
}

extern "C" int cudaopt_run_grid(const cudaopt_launch_config* c, cudaopt_thread_body body, void** args) {
    if (!c) return CUDAOPT_BAD_LAUNCH;
    if (c->error && c->error_size) c->error[0] = '\0';
    if (tls_worker) {  /* a launch from kernel code would wait for itself */
        Message nested;
        nested.reset();
        nested.add("a kernel cannot launch kernels on the cpu backend (dynamic parallelism)");
        copy_error(c, nested);
        return CUDAOPT_BAD_LAUNCH;
    }
    static Message why;  /* guarded by g_launch_lock below, except for validation */
    Message invalid;
    invalid.reset();
    if (!validate(c, body, invalid)) {
        copy_error(c, invalid);
        return CUDAOPT_BAD_LAUNCH;
    }
    pthread_mutex_lock(&g_launch_lock);
    why.reset();
    int status = launch_locked(c, body, args, why);
    copy_error(c, why);
    pthread_mutex_unlock(&g_launch_lock);
    return status;
}

extern "C" const char* cudaopt_runtime_version(void) {
    static char text[128];
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        init_switch();
        snprintf(text, sizeof text, "cudaopt-cpu-runtime 1.0 (context switch: %s)",
                 switch_flavour_asm() ? "x86-64 asm" : "ucontext");
    });
    return text;
}
