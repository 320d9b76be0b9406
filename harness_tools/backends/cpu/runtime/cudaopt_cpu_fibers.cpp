/* Fibers and the block scheduler of the cpu runtime.
 *
 * The CUDA threads of a block are fibers on one OS thread. A fiber runs until it waits (barrier,
 * warp operation) or exits, then switches straight to the next runnable fiber of the block's run
 * queue; the block runner's own context is re-entered only when the block is over or abandoned.
 * Arrivals are counted: a barrier is released when every live thread waits at the same one, a warp
 * group when every existing lane of its mask has arrived. Anything that can no longer complete
 * (exited threads, different barriers, mismatched warp operations, an empty run queue) is a kernel
 * error with the source lines involved.
 */
#include "cudaopt_cpu_runtime_internal.h"

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

/* ========================================================================== x86-64 context switch
 * cudaopt_fiber_switch(save, load): push the callee-saved registers and the x87 control word and
 * MXCSR (both callee-saved by the ABI) on the current stack, store rsp in *save, continue on the stack
 * `load` with the mirror image. No signal mask, no system call. */
#if CUDAOPT_ASM_SWITCH
extern "C" void cudaopt_fiber_switch(void** save, void* load) __attribute__((visibility("hidden")));
asm(R"(
    .text
    .p2align 4
    .globl  cudaopt_fiber_switch
    .hidden cudaopt_fiber_switch
    .type   cudaopt_fiber_switch, @function
cudaopt_fiber_switch:
    .cfi_startproc
    pushq   %rbp
    .cfi_adjust_cfa_offset 8
    pushq   %rbx
    .cfi_adjust_cfa_offset 8
    pushq   %r12
    .cfi_adjust_cfa_offset 8
    pushq   %r13
    .cfi_adjust_cfa_offset 8
    pushq   %r14
    .cfi_adjust_cfa_offset 8
    pushq   %r15
    .cfi_adjust_cfa_offset 8
    subq    $16, %rsp
    .cfi_adjust_cfa_offset 16
    movq    $0, (%rsp)
    fnstcw  (%rsp)
    stmxcsr 4(%rsp)
    movq    (%rsp), %rdx
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    cmpq    (%rsp), %rdx
    je      1f
    ldmxcsr 4(%rsp)
    fldcw   (%rsp)
1:
    addq    $16, %rsp
    .cfi_adjust_cfa_offset -16
    popq    %r15
    .cfi_adjust_cfa_offset -8
    popq    %r14
    .cfi_adjust_cfa_offset -8
    popq    %r13
    .cfi_adjust_cfa_offset -8
    popq    %r12
    .cfi_adjust_cfa_offset -8
    popq    %rbx
    .cfi_adjust_cfa_offset -8
    popq    %rbp
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size   cudaopt_fiber_switch, .-cudaopt_fiber_switch
)");
#endif

namespace cudaopt {
namespace rt {
namespace detail {

namespace {

bool g_asm = false;
pthread_once_t g_switch_once = PTHREAD_ONCE_INIT;

/* With a CET shadow stack active, a `ret` onto another stack faults; glibc's ucontext knows how to
 * switch shadow stacks, so it takes over. RDSSP is a no-op (leaves 0) when shadow stacks are off. */
void decide_switch() {
#if CUDAOPT_ASM_SWITCH
    unsigned long long ssp = 0;
    asm volatile("rdsspq %0" : "+r"(ssp));
    g_asm = ssp == 0;
#endif
}

inline void ctx_switch(Context* from, Context* to) {
#if CUDAOPT_ASM_SWITCH
    if (__builtin_expect(g_asm, 1)) {
        cudaopt_fiber_switch(&from->sp, to->sp);
        return;
    }
#endif
    swapcontext(from->uc, to->uc);
}

void fiber_entry();

/* A fresh fiber's first switch "returns" into fiber_entry with the stack aligned as after a call. */
void ctx_make(Worker* w, Context* c, char* stack_lo, size_t size) {
    (void)w;
#if CUDAOPT_ASM_SWITCH
    if (g_asm) {
        auto* top = reinterpret_cast<uint64_t*>(stack_lo + size);  /* 16-byte aligned */
        top[-1] = 0;                                               /* fake return address: ends backtraces */
        top[-2] = reinterpret_cast<uint64_t>(&fiber_entry);
        for (int i = 3; i <= 8; ++i) top[-i] = 0;                  /* rbp rbx r12 r13 r14 r15 */
        top[-9] = 0;                                               /* alignment padding */
        top[-10] = w->fpu_cw | uint64_t(w->mxcsr) << 32;           /* x87 CW at 0(%rsp), MXCSR at 4(%rsp) */
        c->sp = top - 10;
        return;
    }
#endif
    getcontext(c->uc);
#if defined(__x86_64__)
    c->uc->uc_mcontext.fpregs->cwd = static_cast<unsigned short>(w->fpu_cw);  /* not the switching fiber's */
    c->uc->uc_mcontext.fpregs->mxcsr = w->mxcsr;
#endif
    c->uc->uc_stack.ss_sp = stack_lo;
    c->uc->uc_stack.ss_size = size;
    c->uc->uc_link = nullptr;
    makecontext(c->uc, fiber_entry, 0);
}

/* ================================================================================= run queue */

inline void q_push(Sched& s, unsigned i) { s.queue[s.qtail++ & (kMaxThreads - 1)] = static_cast<uint16_t>(i); }

inline Fiber* q_pop(Worker* w) {
    Sched& s = w->s;
    if (s.qhead == s.qtail) return nullptr;
    return &w->fiber[s.queue[s.qhead++ & (kMaxThreads - 1)]];
}

/* Stacks are 512 KiB apart, so their tops would all map to the same L1 sets; skewing each start
 * by a few cache lines keeps the hot frames of a block's fibers from evicting each other. */
inline size_t stack_skew(unsigned i) { return (i * 320u) % 20480u; }

/* Run `to`, saving the current registers in `from`. A fresh fiber's stack is prepared only now, so
 * the lines just written are still in L1 when it starts. */
inline void enter(Worker* w, Context* from, Fiber* to) {
    w->cur = to;
    tls_ctx = &to->ctx;
    if (to->fresh) {
        to->fresh = false;
        ctx_make(w, &to->context, to->stack + kStackGuard, kFiberStack - stack_skew(to->ctx.linear_tid));
    }
    tsan_enter(to);  /* race checks: TSan follows the switch, with no happens-before */
    ctx_switch(from, &to->context);
}

inline void resume(Worker* w, Fiber* from, Fiber* to) { enter(w, &from->context, to); }

[[noreturn]] void fail_stalled(Worker* w);

/* The current fiber has just started waiting: run the next one (returns when it is woken). */
inline void wait_turn(Worker* w, Fiber* f) {
    if (__builtin_expect(g_launch.cancel.load(std::memory_order_relaxed), 0)) {
        w->block_failed = true;
        leave_block(w);
    }
    Fiber* next = q_pop(w);
    if (__builtin_expect(!next, 0)) fail_stalled(w);
    resume(w, f, next);
}

/* ================================================================================= messages */

const char* barrier_name(int op) {
    static const char* const names[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and",
                                        "__syncthreads_or"};
    return op >= 0 && op <= 3 ? names[op] : "__syncthreads";
}

void add_block(Message& m, const Worker* w) {
    const Index3& b = w->fiber[0].ctx.block_idx;
    m.add("block (%u,%u,%u)", b.x, b.y, b.z);
}

void add_thread(Message& m, unsigned linear) {
    Index3 t = thread_of(linear);
    m.add("thread (%u,%u,%u)", t.x, t.y, t.z);
}

/* "__syncthreads at kernel.cu(10) by 128 threads (first: thread (0,0,0))" for each line waited at. */
void add_barrier_lines(Message& m, const Worker* w) {
    struct Line { int line, op; unsigned count, first; };
    Line lines[8];
    unsigned nlines = 0, more = 0;
    for (unsigned i = 0; i < w->s.n; ++i) {
        const Fiber& f = w->fiber[i];
        if (f.state != kAtBarrier) continue;
        unsigned k = 0;
        while (k < nlines && lines[k].line != f.line) ++k;
        if (k == nlines) {
            if (nlines == 8) { ++more; continue; }
            lines[nlines++] = Line{f.line, f.barrier_op, 0, i};
        }
        ++lines[k].count;
    }
    for (unsigned k = 0; k < nlines; ++k) {
        m.add("%s%s at kernel.cu(%d) by %u thread%s (first: ", k ? ", " : "", barrier_name(lines[k].op),
              lines[k].line, lines[k].count, lines[k].count == 1 ? "" : "s");
        add_thread(m, lines[k].first);
        m.add(")");
    }
    if (more) m.add(", and %u more threads at other lines", more);
}

unsigned first_in_state(const Worker* w, uint8_t state) {
    for (unsigned i = 0; i < w->s.n; ++i)
        if (w->fiber[i].state == state) return i;
    return 0;
}

/* Every live thread waits at a barrier, but some threads exited or they wait at different lines. */
[[noreturn]] void fail_barrier(Worker* w) {
    const Sched& s = w->s;
    Message& m = w->msg;
    m.reset();
    if (!s.lines_differ) {
        const Fiber& f = w->fiber[first_in_state(w, kAtBarrier)];
        m.add("%s at kernel.cu(%d) in ", barrier_name(f.barrier_op), f.line);
        add_block(m, w);
        m.add(" was reached by %u of %u threads; the others exited without reaching it (first: ", s.n_barrier, s.n);
        add_thread(m, first_in_state(w, kExited));
        m.add(")");
    } else {
        m.add("threads of ");
        add_block(m, w);
        m.add(" wait at different barriers: ");
        add_barrier_lines(m, w);
        if (s.n_exited) {
            m.add("; %u threads exited without reaching any (first: ", s.n_exited);
            add_thread(m, first_in_state(w, kExited));
            m.add(")");
        }
        m.add("; a barrier is released only when every thread of the block reaches the same one");
    }
    fail(w, CUDAOPT_KERNEL_ERROR);
}

void add_group(Message& m, const WarpGroup& g, unsigned warp) {
    m.add("lane%s ", __builtin_popcount(g.arrived) == 1 ? "" : "s");
    m.add_lanes(g.arrived);
    m.add(" of warp %u wait%s at %s at kernel.cu(%d) with mask 0x%08x", warp,
          __builtin_popcount(g.arrived) == 1 ? "s" : "", g.what, g.line, g.mask);
}

/* Nothing is runnable and not every thread has exited: say where everybody waits. */
void fail_stalled(Worker* w) {
    const Sched& s = w->s;
    Message& m = w->msg;
    m.reset();
    m.add("deadlock in ");
    add_block(m, w);
    m.add(": no thread can proceed. Waiting: ");
    const char* sep = "";
    if (s.n_barrier) {
        add_barrier_lines(m, w);
        sep = "; ";
    }
    unsigned listed = 0, more = 0;
    bool split_warp = false;
    for (unsigned wi = 0; wi * 32 < s.n; ++wi) {
        const Warp& wp = w->warps[wi];
        split_warp |= wp.ngroups > 1;
        for (int g = 0; g < wp.ngroups; ++g) {
            if (listed == 6) { ++more; continue; }
            m.add("%s", sep);
            add_group(m, wp.groups[g], wi);
            m.add(" (missing lane%s ", __builtin_popcount(wp.groups[g].mask & ~wp.groups[g].arrived) == 1 ? "" : "s");
            m.add_lanes(wp.groups[g].mask & ~wp.groups[g].arrived);
            m.add(")");
            sep = "; ";
            ++listed;
        }
    }
    if (more) m.add("; and %u more warp groups", more);
    if (split_warp)
        m.add(". Lanes of one warp wait at different warp operations: every lane named in a mask must call "
              "the same operation with the same mask");
    if (s.n_exited) {
        m.add("; %u threads have exited (first: ", s.n_exited);
        add_thread(m, first_in_state(w, kExited));
        m.add(")");
    }
    fail(w, CUDAOPT_KERNEL_ERROR);
}

[[noreturn]] void fail_exited_lane(Worker* w, const char* what, int line, unsigned mask, unsigned warp,
                                   unsigned lane) {
    Message& m = w->msg;
    m.reset();
    m.add("%s at kernel.cu(%d): mask 0x%08x names lane %u of warp %u in ", what, line, mask, lane, warp);
    add_block(m, w);
    m.add(", which has exited");
    fail(w, CUDAOPT_KERNEL_ERROR);
}

[[noreturn]] void fail_without_fibers(Worker* w, const char* what, int line) {
    if (!w) kernel_error(line, "%s called outside a kernel", what);  /* aborts: a host-side bug */
    Message& m = w->msg;
    m.reset();
    m.add("kernel.cu(%d): %s was called, but the kernel was launched without fibers (use_fibers=0), so "
          "threads run one after another and cannot meet; the launcher must enable fibers for sources "
          "with barriers or warp operations", line, what);
    add_where(m, w->flat);
    fail(w, CUDAOPT_KERNEL_ERROR);
}

/* ================================================================================ thread exit */

void release_row(Warp& wp, unsigned lane) {
    int row = wp.lane_buf[lane];
    if (row < 0) return;
    wp.lane_buf[lane] = -1;
    if (--wp.refs[row] == 0) {
        tsan_row_freed(wp, row);  /* every participant has acquired it: the next group gets a fresh one */
        wp.free_rows[wp.free_top++] = static_cast<uint8_t>(row);
    }
}

[[noreturn]] void fiber_exited(Worker* w, Fiber* f) {
    Sched& s = w->s;
    f->state = kExited;
    --s.n_live;
    ++s.n_exited;
    Warp& wp = w->warps[f->ctx.warp];
    const unsigned bit = 1u << f->ctx.lane;
    wp.exited |= bit;
    release_row(wp, f->ctx.lane);
    for (int g = 0; g < wp.ngroups; ++g)
        if (wp.groups[g].mask & bit)
            fail_exited_lane(w, wp.groups[g].what, wp.groups[g].line, wp.groups[g].mask, f->ctx.warp, f->ctx.lane);
    if (s.n_live == 0) leave_block(w);                 /* the block is done */
    if (s.n_barrier && s.n_barrier == s.n_live) fail_barrier(w);
    Fiber* next = q_pop(w);
    if (!next) fail_stalled(w);
    enter(w, &w->scratch, next);
    __builtin_unreachable();
}

void fiber_entry() {
    Worker* w = tls_worker;
    Fiber* f = w->cur;
    tsan_fiber_start(w);
    w->in_kernel = 1;
    g_launch.body(g_launch.args);
    w->in_kernel = 0;
    tsan_fiber_exit(w);
    fiber_exited(w, f);
}

/* ============================================================================ warp rendezvous */

bool same_op(const char* a, const char* b) { return a == b || strcmp(a, b) == 0; }

[[noreturn]] void fail_warp_mismatch(Worker* w, const WarpGroup& g, unsigned warp, unsigned lane, unsigned mask,
                                     int line, const char* what) {
    Message& m = w->msg;
    m.reset();
    m.add("lanes of warp %u in ", warp);
    add_block(m, w);
    m.add(" call %s at kernel.cu(%d) with different masks: lane %u with mask 0x%08x, while ", what, line, lane, mask);
    add_group(m, g, warp);
    m.add("; every lane named in a mask must call the same operation with the same mask");
    fail(w, CUDAOPT_KERNEL_ERROR);
}

/* Deposit `value`, wait for the rest of the group, return the row holding everybody's values. */
int warp_arrive(Worker* w, unsigned mask, unsigned long long value, int line, const char* what, bool is_sync) {
    Fiber* f = w->cur;
    const unsigned lane = f->ctx.lane, warp = f->ctx.warp, bit = 1u << lane;
    Warp& wp = w->warps[warp];
    const unsigned m = mask & wp.existing;             /* lanes past the block's end do not exist */
    if (!(m & bit)) {
        Message& msg = w->msg;
        msg.reset();
        msg.add("kernel.cu(%d): %s with mask 0x%08x does not name the calling lane %u", line, what, mask, lane);
        add_where(msg, f->ctx);
        fail(w, CUDAOPT_KERNEL_ERROR);
    }
    if (m & wp.exited) fail_exited_lane(w, what, line, mask, warp, static_cast<unsigned>(__builtin_ctz(m & wp.exited)));
    release_row(wp, lane);

    /* Join the pending group of the same operation. Groups at other operations may overlap ours:
     * lanes progress independently (sm_70+), e.g. half a warp may already wait at a later __syncwarp
     * naming lanes still busy here. What can never complete is reported when a lane exits or
     * nothing is runnable; only the same call site with a different overlapping mask fails here. */
    WarpGroup* g = nullptr;
    for (int i = 0; i < wp.ngroups; ++i) {
        WarpGroup& c = wp.groups[i];
        if (c.is_sync != is_sync || (!is_sync && (c.line != line || !same_op(c.what, what)))) continue;
        if (c.mask == m) {
            g = &c;
            break;
        }
        if (!is_sync && (c.mask & m)) fail_warp_mismatch(w, c, warp, lane, mask, line, what);
    }
    if (!g) {
        if (wp.free_top == 0) abort();                 /* impossible: each lane holds at most one row */
        const int row = wp.free_rows[--wp.free_top];
        wp.refs[row] = static_cast<uint8_t>(__builtin_popcount(m));
        g = &wp.groups[wp.ngroups++];
        *g = WarpGroup{m, 0, line, what, is_sync, row};
        tsan_row_taken(wp, row);
        for (unsigned ghost = mask & ~wp.existing; ghost; ghost &= ghost - 1)  /* lanes past the block: 0 */
            wp.rows[row][__builtin_ctz(ghost)] = 0;
    }
    const int row = g->buf;
    g->arrived |= bit;
    wp.rows[row][lane] = value;
    wp.lane_buf[lane] = static_cast<int8_t>(row);
    tsan_warp_arrive(wp, row);  /* race checks: the participants of a warp operation synchronise */
    if (g->arrived != g->mask) {
        f->state = kAtWarp;
        wait_turn(w, f);
        tsan_warp_depart(wp, row);
        return row;
    }
    tsan_warp_depart(wp, row);
    /* complete: the others become runnable in lane order, the group is dropped */
    unsigned others = g->arrived & ~bit;
    Fiber* base = &w->fiber[warp * 32];
    while (others) {
        const unsigned l = static_cast<unsigned>(__builtin_ctz(others));
        others &= others - 1;
        base[l].state = kRunning;
        q_push(w->s, warp * 32 + l);
    }
    *g = wp.groups[--wp.ngroups];
    return row;
}

}  // namespace

/* ================================================================================ block runner */

bool switch_flavour_asm() {
    init_switch();
    return g_asm;
}

void init_switch() { pthread_once(&g_switch_once, decide_switch); }

/* Kernels run with the ABI's default floating-point control (round to nearest, no flush-to-zero,
 * exceptions masked) whatever the creating thread had (e.g. FTZ/DAZ set by a -ffast-math library). */
void reset_fpu(Worker* w) {
#if defined(__x86_64__)
    unsigned short cw = 0x037F;
    unsigned mx = 0x1F80;
    asm volatile("fldcw %0" : : "m"(cw));
    asm volatile("ldmxcsr %0" : : "m"(mx));
    w->fpu_cw = cw;
    w->mxcsr = mx;
#else
    (void)w;
#endif
}

void leave_block(Worker* w) {
    w->in_kernel = 0;
    w->cur = nullptr;
    tls_ctx = nullptr;
    tsan_to_main(w);
    ctx_switch(&w->scratch, &w->main);
    __builtin_unreachable();
}

bool run_block_fibers(Worker* w, Index3 block_idx) {
    const Launch& L = g_launch;
    Sched& s = w->s;
    const unsigned n = L.threads;
    s.n = s.n_live = n;
    s.n_exited = s.n_barrier = 0;
    s.gen = 0;
    s.qhead = s.qtail = 0;
    Index3 tid{0, 0, 0};
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = w->fiber[i];
        if (!f.stack && (f.stack = map_guarded(kFiberStack, kStackGuard))) ++w->stacks;
        if (!f.stack) {
            Message& m = w->msg;
            m.reset();
            m.add("cannot allocate the stack of thread %u (out of memory)", i);
            record_error(CUDAOPT_CRASH, m.text);
            return false;
        }
        ThreadContext& t = f.ctx;
        t.thread_idx = tid;
        if (++tid.x == L.block.x && (tid.x = 0, ++tid.y == L.block.y)) tid.y = 0, ++tid.z;
        t.block_idx = block_idx;
        t.block_dim = L.block;
        t.grid_dim = L.grid;
        t.linear_tid = i;
        t.lane = i & 31u;
        t.warp = i >> 5;
        t.dynamic_shared = w->shared;
        f.state = kRunning;
        f.fresh = true;
        q_push(s, i);
    }
    for (unsigned wi = 0; wi * 32 < n; ++wi) {
        Warp& wp = w->warps[wi];
        const unsigned lanes = n - wi * 32;
        wp.existing = lanes >= 32 ? ~0u : (1u << lanes) - 1;
        wp.exited = 0;
        wp.ngroups = 0;
        wp.free_top = 32;
        for (int r = 0; r < 32; ++r) {
            wp.lane_buf[r] = -1;
            wp.refs[r] = 0;
            wp.free_rows[r] = static_cast<uint8_t>(r);
        }
    }
    w->block_failed = false;
    tsan_begin_block(w);
    enter(w, &w->main, q_pop(w));  /* back here when the block is over or abandoned */
    w->cur = nullptr;
    tls_ctx = nullptr;
    tsan_end_block(w);
    return !w->block_failed;
}

}  // namespace detail

/* ===================================================================== core API: synchronisation */

using namespace detail;

int syncthreads(int line, int op, int pred) {
    Worker* w = tls_worker;
    if (__builtin_expect(!w || !w->fibers, 0)) fail_without_fibers(w, barrier_name(op), line);
    w->in_kernel = 0;
    Sched& s = w->s;
    Fiber* f = w->cur;
    if (s.n_barrier == 0) {
        s.barrier_line = line;
        s.lines_differ = false;
        s.acc_count = 0;
        s.acc_and = 1;
        s.acc_or = 0;
    } else if (line != s.barrier_line) {
        s.lines_differ = true;
    }
    const int p = pred != 0;
    s.acc_count += p;
    s.acc_and &= p;
    s.acc_or |= p;
    f->line = line;
    f->barrier_op = static_cast<uint8_t>(op);
    /* race checks: every arrival releases on this generation's object, every departure acquires it
     * (two objects by parity: the last arriver may reach the next barrier before the others depart) */
    tsan_barrier_arrive(w);
    int result;
    if (++s.n_barrier < s.n_live) {
        f->state = kAtBarrier;
        f->barrier_gen = s.gen;
        wait_turn(w, f);
        result = s.result[f->barrier_gen & 1];
        tsan_barrier_depart(w, f);
    } else {
        if (s.n_exited || s.lines_differ) {
            f->state = kAtBarrier;  /* counted in the report */
            fail_barrier(w);
        }
        result = op == 1 ? s.acc_count : op == 2 ? s.acc_and : op == 3 ? s.acc_or : 0;
        s.result[s.gen & 1] = result;
        tsan_barrier_last(w);
        ++s.gen;
        s.n_barrier = 0;
        /* every other live thread waits here: all of them become runnable, in thread order */
        for (unsigned i = 0; i < s.n; ++i)
            if (w->fiber[i].state == kAtBarrier) {
                w->fiber[i].state = kRunning;
                q_push(s, i);
            }
    }
    w->in_kernel = 1;
    return result;
}

const unsigned long long* warp_exchange(unsigned int mask, unsigned long long value, int line, const char* what) {
    Worker* w = tls_worker;
    if (__builtin_expect(!w || !w->fibers, 0)) fail_without_fibers(w, what, line);
    w->in_kernel = 0;
    const int row = warp_arrive(w, mask, value, line, what, false);
    w->in_kernel = 1;
    return w->warps[w->cur->ctx.warp].rows[row];
}

void syncwarp(unsigned int mask, int line) {
    Worker* w = tls_worker;
    if (__builtin_expect(!w || !w->fibers, 0)) fail_without_fibers(w, "__syncwarp", line);
    w->in_kernel = 0;
    warp_arrive(w, mask, 0, line, "__syncwarp", true);
    w->in_kernel = 1;
}

unsigned int active_mask() {
    Worker* w = tls_worker;
    if (!w) kernel_error(0, "__activemask called outside a kernel");
    if (!w->fibers) {  /* threads run one after another: report the warp as converged */
        const unsigned lanes = g_launch.threads - w->flat.warp * 32;
        return lanes >= 32 ? ~0u : (1u << lanes) - 1;
    }
    const Warp& wp = w->warps[w->cur->ctx.warp];
    return wp.existing & ~wp.exited;
}

}  // namespace rt
}  // namespace cudaopt
