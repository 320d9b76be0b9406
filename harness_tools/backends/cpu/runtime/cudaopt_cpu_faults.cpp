/* Faults in kernel code: SIGSEGV, SIGBUS, SIGFPE and SIGILL on a pool thread while user code runs.
 *
 * The handler (on the pool thread's alternate stack, so a stack overflow can be handled) only records
 * the signal, address, error code and instruction pointer and siglongjmps to the worker's launch frame;
 * the message is built there, outside signal context. Fibers in flight are abandoned, which is safe:
 * the next block re-initialises them. A fault anywhere else is a runtime or host bug: the previous
 * disposition is restored and the fault repeats under it (by default: a core dump).
 */
#include "cudaopt_cpu_runtime_internal.h"

#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>

namespace cudaopt {
namespace rt {
namespace detail {

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];
struct sigaction g_previous[kSignalCount];

int signal_slot(int sig) {
    int i = 0;
    while (i + 1 < kSignalCount && kSignals[i] != sig) ++i;
    return i;
}

bool in_range(uintptr_t a, const void* lo, size_t size) {
    const uintptr_t l = reinterpret_cast<uintptr_t>(lo);
    return a >= l && a - l < size;
}

/* The guard of the running fiber's stack (or of the worker stack when running without fibers). */
bool in_stack_guard(const Worker* w, uintptr_t addr) {
    if (w->fibers && w->cur) return in_range(addr, w->cur->stack, kStackGuard);
    return in_range(addr, w->stack_lo - kStackGuard, kStackGuard);
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
    Worker* w = tls_worker;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    /* a stack overflow inside a runtime call made by the kernel is still the kernel's */
    const bool kernels = w && (w->in_kernel || (!w->in_printf && g_launch.config && in_stack_guard(w, addr)));
    if (!kernels) {
        sigaction(sig, &g_previous[signal_slot(sig)], nullptr);
        if (info->si_code <= 0) raise(sig);  /* sent, not a fault: returning would not repeat it */
        return;
    }
    w->in_kernel = 0;
    w->fault_sig = sig;
    w->fault_code = info->si_code;
    w->fault_addr = addr;
    w->fault_ip = 0;
    w->fault_err_valid = false;
#if defined(__x86_64__) && defined(REG_ERR) && defined(REG_RIP)
    const ucontext_t* uc = static_cast<const ucontext_t*>(uctx);
    w->fault_err = static_cast<long>(uc->uc_mcontext.gregs[REG_ERR]);
    w->fault_ip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
    w->fault_err_valid = sig == SIGSEGV && info->si_code != SI_KERNEL;
#else
    (void)uctx;
#endif
    if (w->fibers) tsan_to_main(w);  /* race checks: the jump lands in the block runner's TSan state */
    siglongjmp(w->jmp, 1);
}

/* "[code at kernel.so: _Z5sgemmPKfS0_Pfiii+0x4c]", from the dynamic symbol table (no demangling:
 * after a wild write the heap may be corrupt, so nothing here allocates). */
void add_code_location(Message& m, uintptr_t ip) {
    Dl_info info;
    if (!ip || !dladdr(reinterpret_cast<void*>(ip), &info) || !info.dli_fname) return;
    const char* file = strrchr(info.dli_fname, '/');
    file = file ? file + 1 : info.dli_fname;
    /* the offset in the file comes first: the parent turns it into a kernel.cu line (addr2line) */
    const unsigned long in_file = static_cast<unsigned long>(ip - reinterpret_cast<uintptr_t>(info.dli_fbase));
    if (info.dli_sname && info.dli_saddr)
        m.add(" [code at %s+0x%lx: %s+0x%lx]", file, in_file, info.dli_sname,
              static_cast<unsigned long>(ip - reinterpret_cast<uintptr_t>(info.dli_saddr)));
    else
        m.add(" [code at %s+0x%lx]", file, in_file);
}

const char* access_kind(const Worker* w) {
    if (!w->fault_err_valid) return "access";
    if (w->fault_err & 16) return "instruction fetch";  /* page-fault error code: I/D bit */
    return (w->fault_err & 2) ? "write" : "read";       /* W/R bit */
}

/* "at byte offset 4096 of its 4096 bytes (just past the end)" and friends. */
void add_offset(Message& m, uintptr_t addr, uintptr_t data, size_t size) {
    if (addr < data) {
        m.add("%lu bytes before the start of its %zu bytes", static_cast<unsigned long>(data - addr), size);
        return;
    }
    const unsigned long off = static_cast<unsigned long>(addr - data);
    m.add("byte offset %lu of its %zu bytes", off, size);
    if (off == size) m.add(" (just past the end)");
    else m.add(" (%lu bytes past the end)", off - static_cast<unsigned long>(size));
}

const cudaopt_buffer* guarded_buffer(uintptr_t addr) {
    const cudaopt_launch_config* c = g_launch.config;
    const size_t page = page_size();
    for (int i = 0; i < c->buffer_count; ++i) {
        const cudaopt_buffer& b = c->buffers[i];
        if (!b.mapping || b.mapping_size < 2 * page) continue;
        const char* map = static_cast<const char*>(b.mapping);
        if (in_range(addr, map, page) || in_range(addr, map + b.mapping_size - page, page)) return &b;
    }
    return nullptr;
}

/* For an unattributable address: the nearest buffer within 16 MiB, as a hint. */
void add_nearest_buffer(Message& m, uintptr_t addr, const char* kind) {
    const cudaopt_launch_config* c = g_launch.config;
    const cudaopt_buffer* best = nullptr;
    uintptr_t best_dist = uintptr_t(16) << 20;
    for (int i = 0; i < c->buffer_count; ++i) {
        const cudaopt_buffer& b = c->buffers[i];
        if (!b.data) continue;
        const uintptr_t lo = reinterpret_cast<uintptr_t>(b.data), hi = lo + b.size;
        const uintptr_t dist = addr < lo ? lo - addr : addr >= hi ? addr - hi : 0;
        if (dist < best_dist) best = &b, best_dist = dist;
    }
    if (!best) {
        m.add(" (%s, not in any kernel argument)", kind);
        return;
    }
    m.add(" (%s, not in any kernel argument; nearest is '%s': ", kind, best->name ? best->name : "?");
    add_offset(m, addr, reinterpret_cast<uintptr_t>(best->data), best->size);
    m.add(", beyond its guard page)");
}

}  // namespace

void install_fault_handlers() {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

void install_alt_stack() {
    char* mem = map_guarded(kAltStack, page_size());
    if (!mem) return;  /* faults still work; only a stack overflow would then kill the process */
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = mem + page_size();
    ss.ss_size = kAltStack;
    sigaltstack(&ss, nullptr);
}

void report_fault(Worker* w) {
    const ThreadContext& t = w->fibers && w->cur ? w->cur->ctx : w->flat;
    const uintptr_t addr = w->fault_addr;
    Message& m = w->msg;
    m.reset();
    int status = CUDAOPT_CRASH;
    if (w->fault_sig == SIGFPE) {
        status = CUDAOPT_KERNEL_ERROR;
        m.add("arithmetic exception: %s (a GPU returns an unspecified value instead)",
              w->fault_code == FPE_INTDIV ? "integer division by zero"
              : w->fault_code == FPE_INTOVF ? "integer overflow in division" : "floating-point trap");
    } else if (w->fault_sig == SIGILL) {
        status = CUDAOPT_KERNEL_ERROR;
        m.add("illegal instruction (e.g. __builtin_trap() or a __builtin_unreachable() that was reached)");
    } else if (const cudaopt_buffer* b = guarded_buffer(addr)) {
        status = CUDAOPT_OUT_OF_BOUNDS;
        m.add("out-of-bounds %s to argument '%s' at ", access_kind(w), b->name ? b->name : "?");
        add_offset(m, addr, reinterpret_cast<uintptr_t>(b->data), b->size);
    } else if (in_range(addr, w->shared_end, page_size())) {
        status = CUDAOPT_OUT_OF_BOUNDS;
        m.add("out-of-bounds %s of dynamic shared memory at ", access_kind(w));
        add_offset(m, addr, reinterpret_cast<uintptr_t>(w->shared), g_launch.dynamic_shared);
    } else if (in_stack_guard(w, addr)) {
        status = CUDAOPT_KERNEL_ERROR;
        m.add("stack overflow: the %zu KiB stack of a CUDA thread is exhausted (deep recursion or large local "
              "arrays)", (w->fibers ? kFiberStack : kWorkerStack) / 1024);
    } else if (w->fault_sig == SIGSEGV && w->fault_code == SI_KERNEL) {
        m.add("invalid or misaligned access (general-protection fault: e.g. a misaligned vector load/store or "
              "a non-canonical pointer)");
    } else if (w->fault_sig == SIGBUS) {
        m.add("bus error at 0x%lx (misaligned or unbacked memory)", static_cast<unsigned long>(addr));
    } else {
        m.add("invalid memory access at 0x%lx", static_cast<unsigned long>(addr));
        add_nearest_buffer(m, addr, access_kind(w));
    }
    add_where(m, t);
    add_code_location(m, w->fault_ip);
    record_error(status, m.text);
}

}  // namespace detail
}  // namespace rt
}  // namespace cudaopt
