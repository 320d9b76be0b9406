"""The seccomp filter of every jailed process (x86-64; none elsewhere yet), as classic BPF for bubblewrap's
``--seccomp``.

Every jail refuses, with EPERM, the syscalls listed below and every x32 call; a foreign architecture's call kills
the process. A program that starts no other process (:attr:`harness_tools.run.jail.JailSpec.spawns` False: the cpu
worker, the compiler child) also gets fork and vfork refused, clone refused unless it makes a thread
(``CLONE_THREAD`` in its flags), and clone3, whose flags a filter cannot read, answered ENOSYS, so the C library
makes its threads with clone instead. Then a fork bomb needs no process limit at all: as root without a cgroup (the
GPU host's microVM) neither ``pids.max`` nor ``RLIMIT_NPROC`` can bound one.
"""

from __future__ import annotations

import platform
import struct

# Syscalls a jailed process never needs and an attacker wants (x86-64 numbers): tracing or reading other
# processes (a candidate could stop the jail's init and wedge its parent), kernel keyrings, BPF, module and
# kexec loading, mounts and new namespaces, io_uring (its operations bypass this filter), handle-based opens.
_DENIED_SYSCALLS = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "keyctl": 250,
                    "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323, "kexec_load": 246,
                    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
                    "open_by_handle_at": 304, "name_to_handle_at": 303, "mount": 165, "umount2": 166,
                    "pivot_root": 155, "chroot": 161, "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103,
                    "acct": 163, "unshare": 272, "setns": 308, "open_tree": 428, "move_mount": 429, "fsopen": 430,
                    "fsconfig": 431, "fsmount": 432, "fspick": 433, "io_uring_setup": 425, "io_uring_enter": 426,
                    "io_uring_register": 427}


# Process creation, for a program that starts none (module docstring)
_FORK, _VFORK, _CLONE, _CLONE3 = 57, 58, 56, 435
_CLONE_THREAD = 0x00010000
_LOAD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in seccomp_data (the first argument's low 32 bits: clone's flags)
_ALLOW, _EPERM, _ENOSYS, _KILL = 0x7FFF0000, 0x00050001, 0x00050026, 0x80000000


def seccomp_program(spawns: bool = True) -> bytes | None:
    """A classic-BPF seccomp filter: the syscalls above fail with EPERM, x32 calls too, a foreign
    architecture is killed; with ``spawns`` False, no new process either (threads still). None off x86-64 (no
    filter there yet)."""
    if platform.machine() != "x86_64":
        return None
    # (code, jump-if-true label, jump-if-false label, k); labels name the returns at the end, None is the next one
    ins: list[tuple[int, str | None, str | None, int]] = [
        (_LOAD, None, None, _ARCH), (_JEQ, "arch ok", None, 0xC000003E), (_RET, None, None, _KILL),
        (_LOAD, None, None, _NR), (_JGE, "eperm", None, 0x40000000)]  # x32 calls: refused
    ins += [(_JEQ, "eperm", None, nr) for nr in sorted(_DENIED_SYSCALLS.values())]
    if not spawns:
        ins += [(_JEQ, "eperm", None, _FORK), (_JEQ, "eperm", None, _VFORK), (_JEQ, "enosys", None, _CLONE3),
                (_JEQ, None, "allow", _CLONE), (_LOAD, None, None, _ARG0), (_JSET, "allow", "eperm", _CLONE_THREAD)]
    at = {"arch ok": 3, "allow": len(ins), "eperm": len(ins) + 1, "enosys": len(ins) + 2}
    ins += [(_RET, None, None, _ALLOW), (_RET, None, None, _EPERM)] + ([] if spawns else [(_RET, None, None, _ENOSYS)])

    def offset(pc: int, label: str | None) -> int:
        return 0 if label is None else at[label] - pc - 1

    return b"".join(struct.pack("<HBBI", code, offset(pc, jt), offset(pc, jf), k)
                    for pc, (code, jt, jf, k) in enumerate(ins))
