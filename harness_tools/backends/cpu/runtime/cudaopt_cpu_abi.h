/* The C ABI between the cpu backend's Python executor and its C++ runtime (libcudaopt_cpu.so).
 *
 * Python (ctypes) allocates guarded buffers through the runtime, fills them, and calls the
 * launcher that is generated into every kernel's shared object. Everything here is plain C so that
 * ctypes can mirror it; the C++ device API lives in cudaopt_cpu.h.
 */
#ifndef CUDAOPT_CPU_ABI_H
#define CUDAOPT_CPU_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A device buffer, laid out as
 *     [guard page][front pad][data: size bytes][slack][guard page]
 * `data` is `alignment`-aligned and its end is as close to the back guard page as that alignment allows
 * (slack < alignment): 256 gives cudaMalloc's alignment (timed cases), 16 ends the data within 15 bytes of
 * the guard page while keeping 16-byte vector loads aligned (validation cases). Front pad and slack are
 * filled with the 32-bit `fill` word (little-endian, tiled from the start of each): reads there see the
 * pattern, writes there show as a changed pattern; touching either PROT_NONE guard page faults and is
 * reported with the buffer's name, the block and the thread. */
typedef struct cudaopt_buffer {
    const char* name;     /* kernel argument name, for error messages (the caller keeps it alive) */
    void* data;           /* what the kernel receives */
    size_t size;          /* bytes requested (may be 0: data then points at the back guard page) */
    size_t front_pad;     /* bytes between the front guard page and data */
    size_t slack;         /* bytes between data+size and the back guard page */
    void* mapping;        /* the whole mmap'ed region, guard pages included (runtime-owned) */
    size_t mapping_size;
} cudaopt_buffer;

/* Status codes returned by cudaopt_launch and the runtime. */
enum {
    CUDAOPT_OK = 0,
    CUDAOPT_KERNEL_ERROR = 1,    /* barrier divergence, deadlock, bad warp mask, __trap, assert: state is clean */
    CUDAOPT_OUT_OF_BOUNDS = 2,   /* a guard page of a known buffer was touched: state is clean */
    CUDAOPT_CRASH = 3,           /* any other fault (wild pointer, misaligned vector access): the process
                                    may be corrupt, the worker should restart */
    CUDAOPT_BAD_LAUNCH = 4       /* invalid launch configuration (e.g. > 1024 threads per block) */
};

typedef struct cudaopt_launch_config {
    unsigned grid[3];
    unsigned block[3];
    size_t dynamic_shared;       /* bytes of extern __shared__ memory per block */
    int use_fibers;              /* 0: the source has no barrier/warp operation; threads of a block may
                                    run one after another without fibers */
    int os_threads;              /* blocks run in parallel on this many OS threads (>= 1) */
    const cudaopt_buffer* buffers; /* every buffer argument, for attributing faults */
    int buffer_count;
    char* error;                 /* out: a one-paragraph message on failure (NUL-terminated) */
    size_t error_size;
} cudaopt_launch_config;

/* The body of one CUDA thread: calls the kernel with the unpacked arguments. Generated per kernel. */
typedef void (*cudaopt_thread_body)(void** args);

/* Runtime entry points (libcudaopt_cpu.so). */
/* 0 or errno (EINVAL: alignment not a power of two in [16, page size]) */
int cudaopt_buffer_alloc(cudaopt_buffer* buffer, const char* name, size_t size, size_t alignment,
                         uint32_t fill);
void cudaopt_buffer_free(cudaopt_buffer* buffer);
int cudaopt_run_grid(const cudaopt_launch_config* config, cudaopt_thread_body body, void** args);
const char* cudaopt_runtime_version(void);

#ifdef __cplusplus
}
#endif

#endif
