/* Shared by the runtime's sources (not by kernels):
 *   cudaopt_cpu_runtime.cpp  buffers, thread pool, launch, block runners, small core API
 *   cudaopt_cpu_fibers.cpp   context switch and the block scheduler (barriers, warp rendezvous)
 *   cudaopt_cpu_faults.cpp   SIGSEGV/SIGBUS/SIGFPE/SIGILL handling and fault messages
 *   cudaopt_cpu_tsan.cpp     race-check builds only (CUDAOPT_TSAN): CUDA threads as TSan fibers
 *
 * One Worker per pool thread owns everything a running block needs, so the hot paths (barrier,
 * warp exchange, switch) touch only the worker and never lock, allocate or make a system call.
 */
#ifndef CUDAOPT_CPU_RUNTIME_INTERNAL_H
#define CUDAOPT_CPU_RUNTIME_INTERNAL_H

#include "cudaopt_cpu_core.h"

#include <atomic>
#include <cstdarg>
#include <csetjmp>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <pthread.h>
#include <ucontext.h>

/* The hand-written switch exists for x86-64; CUDAOPT_CPU_FORCE_UCONTEXT builds the fallback there
 * too (for testing it). Even when compiled in, it is used only if no shadow stack is active. */
#if defined(__x86_64__) && !defined(CUDAOPT_CPU_FORCE_UCONTEXT)
#define CUDAOPT_ASM_SWITCH 1
#else
#define CUDAOPT_ASM_SWITCH 0
#endif

/* Initial-exec TLS: one %fs-relative load on the hot path and safe to read in a signal handler
 * (global-dynamic TLS in a dlopen'ed library may allocate on first touch). __thread, unlike
 * thread_local, needs no per-access check for a dynamic initialiser. */
#define CUDAOPT_TLS __attribute__((tls_model("initial-exec"))) __thread

namespace cudaopt {
namespace rt {
namespace detail {

constexpr unsigned kMaxThreads = 1024;                 /* per block; also the run queue size */
constexpr unsigned kMaxWarps = kMaxThreads / 32;
constexpr size_t kFiberStack = 256 * 1024;             /* usable stack of one CUDA thread */
constexpr size_t kStackGuard = 256 * 1024;             /* PROT_NONE below it; large, since frames may skip a page */
constexpr size_t kWorkerStack = 8 << 20;               /* pool threads; threads run here without fibers */
constexpr size_t kAltStack = 64 * 1024;                /* signal stack of each pool thread */
constexpr size_t kMaxDynamicShared = 227 * 1024;
constexpr unsigned kMaxOsThreads = 256;
constexpr size_t kMessage = 4096;

size_t page_size();
inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* A bounded message builder (no allocation: also used after a fault). */
struct Message {
    char text[kMessage];
    size_t len;
    void reset() { len = 0; text[0] = '\0'; }
    void add(const char* format, ...) __attribute__((format(printf, 2, 3)));
    void vadd(const char* format, va_list ap) __attribute__((format(printf, 2, 0)));
    void add_lanes(unsigned mask);                     /* "0-15,20" */
};

/* ---- fibers ---- */

struct Context {
    void* sp;                  /* asm flavour: saved stack pointer, everything else is on that stack */
    ucontext_t* uc;            /* fallback flavour: kept out of line (about 1 KiB each) */
};

enum FiberState : uint8_t { kRunning, kAtBarrier, kAtWarp, kExited };

/* Small and dense: the scheduler touches one per switch. */
struct Fiber {
    Context context;
    ThreadContext ctx;
    char* stack;               /* low end of [guard][stack]; null until this slot is first needed */
    uint8_t state;
    bool fresh;                /* not started: its stack is prepared on the first switch to it */
    uint8_t barrier_op;
    int line;                  /* barrier line while kAtBarrier */
    unsigned barrier_gen;      /* generation of the barrier it waits at (selects the result slot) */
#ifdef CUDAOPT_TSAN
    void* tsan;                /* this CUDA thread's TSan fiber (created per block) */
#endif
};

/* Lanes of one warp waiting at one warp operation. Pending groups of a warp have disjoint masks. */
struct WarpGroup {
    unsigned mask;             /* existing lanes named by the mask */
    unsigned arrived;
    int line;
    const char* what;
    bool is_sync;              /* __syncwarp: may be matched across call sites (sm_70 semantics) */
    int buf;                   /* slot row the participants deposit into */
};

/* Deposited values live in refcounted rows: a row stays valid for each participant until its next
 * warp operation, so a fast lane re-entering never overwrites what a slow lane has yet to read. Each
 * lane holds at most one row, hence 32 rows always suffice. */
struct Warp {
    unsigned existing;         /* lanes with linear tid < block size */
    unsigned exited;
    int ngroups;
    int free_top;
    WarpGroup groups[32];
    int8_t lane_buf[32];       /* row each lane holds, -1 none */
    uint8_t refs[32];
    uint8_t free_rows[32];
    unsigned long long rows[32][32];
#ifdef CUDAOPT_TSAN
    void* row_sync[32];        /* TSan sync object of the group using each row (fresh per group) */
#endif
};

/* Barrier counting and the run queue of the block being run. */
struct Sched {
    unsigned n, n_live, n_exited, n_barrier;
    int barrier_line;
    bool lines_differ;
    int acc_count, acc_and, acc_or;
    unsigned gen;
    int result[2];             /* by barrier generation parity: released waiters read theirs later */
    unsigned qhead, qtail;
    uint16_t queue[kMaxThreads];
};

struct Worker {
    unsigned index;
    /* hot state of the running block */
    Fiber* cur;
    bool fibers;               /* this launch runs threads as fibers */
    bool block_failed;         /* set before leaving a block early (error or cancel) */
    Sched s;
    Context main;              /* the block runner's context on the worker stack */
    Context scratch;           /* where an abandoned fiber's registers go */
    ThreadContext flat;        /* the single context of the fiber-less mode */
    volatile sig_atomic_t in_kernel;   /* user code is running (faults are the kernel's) */
    volatile sig_atomic_t in_printf;   /* faults here crash: stdio locks are held */
    sigjmp_buf jmp;            /* set once per launch; faults and fiber-less errors land here */
    /* recorded by the signal handler, formatted after siglongjmp */
    volatile int fault_sig, fault_code;
    uintptr_t fault_addr, fault_ip;
    long fault_err;
    bool fault_err_valid;
    /* memory */
    char* stack_lo;            /* usable low end of the worker stack (its guard lies below) */
    char* shared_end;          /* dynamic shared memory ends here, at a guard page */
    char* shared;              /* this launch's dynamic shared memory */
    unsigned fpu_cw, mxcsr;    /* initial control words for new fibers */
    unsigned stacks;           /* fiber stacks mapped so far (each costs two VMAs) */
    /* pool */
    pthread_t thread;
    unsigned long long seen_gen;
    Message msg;
    Fiber fiber[kMaxThreads];
    Warp warps[kMaxWarps];
    ucontext_t ucs[kMaxThreads + 2];  /* fallback flavour only: fibers, main, scratch */
#ifdef CUDAOPT_TSAN
    void* tsan_main;           /* the pool thread's own TSan state: the block runner's context */
    char* tsan_block;          /* two sync objects ordering this pool thread's blocks */
    char* tsan_barrier;        /* two sync objects per block, by barrier generation parity */
    unsigned long long tsan_taken;     /* blocks taken in this launch */
    unsigned long long tsan_cursor;    /* next linear block index to consider */
#endif
};

/* The launch in progress (one at a time). */
struct Launch {
    const cudaopt_launch_config* config;
    cudaopt_thread_body body;
    void** args;
    Index3 grid, block;
    unsigned threads;
    size_t dynamic_shared;
    bool fibers;
    unsigned long long total_blocks;
    std::atomic<unsigned long long> next_block;
    std::atomic<int> cancel;
    int status;                /* first error (guarded by a lock in runtime.cpp) */
    char error[kMessage];
#ifdef CUDAOPT_TSAN
    unsigned workers;          /* pool threads taking part: block (x,y,z) runs on (x + y + z) % workers */
#endif
};

extern Launch g_launch;
extern CUDAOPT_TLS Worker* tls_worker;
extern CUDAOPT_TLS ThreadContext* tls_ctx;

/* runtime.cpp */
void record_error(int status, const char* text);       /* first error wins; cancels the launch */
[[noreturn]] void fail(Worker* w, int status);         /* record w->msg and leave the block */
void add_where(Message& m, const ThreadContext& t);    /* " in block (..) thread (..)" */
Index3 thread_of(unsigned linear);
char* map_guarded(size_t usable, size_t guard);        /* [guard PROT_NONE][usable RW], returns the base */

/* fibers.cpp */
bool switch_flavour_asm();                             /* decided once: asm, or ucontext */
void init_switch();
void reset_fpu(Worker* w);                             /* default FP control words, for new fibers too */
bool run_block_fibers(Worker* w, Index3 block_idx);    /* false: error or cancelled */
[[noreturn]] void leave_block(Worker* w);

/* faults.cpp */
void install_fault_handlers();
void install_alt_stack();
void report_fault(Worker* w);

/* ---- race-check builds ----
 * With -DCUDAOPT_TSAN the runtime (itself compiled without -fsanitize=thread, so its own bookkeeping,
 * touched by every fiber, is never reported) tells ThreadSanitizer about the CUDA execution model: every
 * CUDA thread is a TSan fiber, switches carry no happens-before, and only barriers and warp operations
 * (and the kernel's own atomics, which TSan sees directly) order accesses. In default builds every hook
 * below is an empty inline function, so the scheduler compiles exactly as before. */
#ifdef CUDAOPT_TSAN
}  // namespace detail
}  // namespace rt
}  // namespace cudaopt
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_set_fiber_name(void* fiber, const char* name);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
}
namespace cudaopt {
namespace rt {
namespace detail {
constexpr unsigned kTsanNoSync = 1;                    /* __tsan_switch_to_fiber_no_sync */
void tsan_attach_worker(Worker* w);                    /* on the pool thread, before its first launch */
unsigned long long tsan_next_block(Worker* w);         /* deterministic: a checkerboard of the grid */
inline void tsan_launch_start(Worker* w) { w->tsan_taken = w->tsan_cursor = 0; }
/* A pool thread's blocks run one after another: each block starts after everything its predecessor did.
 * Threads release on their block's object when they exit and acquire the previous block's when they
 * start (two objects by parity, so an early exit in a block never orders its later-starting siblings). */
inline char* tsan_previous_block(Worker* w) { return w->tsan_block + (w->tsan_taken & 1u); }
inline char* tsan_this_block(Worker* w) { return w->tsan_block + ((w->tsan_taken + 1) & 1u); }
inline void tsan_block_start(Worker* w) { __tsan_acquire(tsan_previous_block(w)); }
inline void tsan_block_filled(Worker* w) { __tsan_release(tsan_previous_block(w)); }
inline void tsan_fiber_start(Worker* w) { __tsan_acquire(tsan_previous_block(w)); }
inline void tsan_fiber_exit(Worker* w) { __tsan_release(tsan_this_block(w)); }
void tsan_begin_block(Worker* w);                      /* name the fibers, fresh barrier objects */
void tsan_end_block(Worker* w);                        /* drop the sync objects of the block */
inline void tsan_enter(Fiber* f) { __tsan_switch_to_fiber(f->tsan, kTsanNoSync); }
inline void tsan_to_main(Worker* w) { __tsan_switch_to_fiber(w->tsan_main, kTsanNoSync); }
/* barriers: arrivals release on the current generation's object, departures acquire the one they waited at */
inline void tsan_barrier_arrive(Worker* w) { __tsan_release(w->tsan_barrier + (w->s.gen & 1u)); }
inline void tsan_barrier_last(Worker* w) { __tsan_acquire(w->tsan_barrier + (w->s.gen & 1u)); }
inline void tsan_barrier_depart(Worker* w, const Fiber* f) { __tsan_acquire(w->tsan_barrier + (f->barrier_gen & 1u)); }
/* warp operations: the same on the object of the group's row */
inline void tsan_warp_arrive(Warp& wp, int row) { __tsan_release(wp.row_sync[row]); }
inline void tsan_warp_depart(Warp& wp, int row) { __tsan_acquire(wp.row_sync[row]); }
void tsan_row_taken(Warp& wp, int row);
void tsan_row_freed(Warp& wp, int row);
inline void tsan_ignore_sync(bool on) { on ? AnnotateIgnoreSyncBegin(__FILE__, __LINE__) : AnnotateIgnoreSyncEnd(__FILE__, __LINE__); }
/* the runtime's own writes through intercepted libc calls (snprintf of an error) are not the kernel's */
inline void tsan_ignore_accesses(bool on) { on ? __tsan_ignore_thread_begin() : __tsan_ignore_thread_end(); }
#else
inline void tsan_attach_worker(Worker*) {}
inline void tsan_launch_start(Worker*) {}
inline void tsan_block_start(Worker*) {}
inline void tsan_block_filled(Worker*) {}
inline void tsan_fiber_start(Worker*) {}
inline void tsan_fiber_exit(Worker*) {}
inline void tsan_begin_block(Worker*) {}
inline void tsan_end_block(Worker*) {}
inline void tsan_enter(Fiber*) {}
inline void tsan_to_main(Worker*) {}
inline void tsan_barrier_arrive(Worker*) {}
inline void tsan_barrier_last(Worker*) {}
inline void tsan_barrier_depart(Worker*, const Fiber*) {}
inline void tsan_warp_arrive(Warp&, int) {}
inline void tsan_warp_depart(Warp&, int) {}
inline void tsan_row_taken(Warp&, int) {}
inline void tsan_row_freed(Warp&, int) {}
inline void tsan_ignore_sync(bool) {}
inline void tsan_ignore_accesses(bool) {}
#endif

}  // namespace detail
}  // namespace rt
}  // namespace cudaopt

#endif
