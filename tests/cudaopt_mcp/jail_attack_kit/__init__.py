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

The kit, by concern: :mod:`.leaks` (what must not leak and where to look), :mod:`.tasks` (the tasks
attacked), :mod:`.payloads` (hostile kernels against the host), :mod:`.worker_attacks` (against the engine),
:mod:`.processes` (what is left running or listening),
:mod:`.sessions` (the servers under attack). Tests use it as ``kit.NAME``.
"""

from __future__ import annotations

from tests.cudaopt_mcp.jail_attack_kit.leaks import (
    Hole,
    Secrets,
    hole,
    make_secrets,
    secret_hits,
)
from tests.cudaopt_mcp.jail_attack_kit.payloads import (
    ENV_DUMP,
    FREEZE_JAIL_INIT,
    KERNEL,
    PRELUDE,
    c_bytes,
    c_str,
    connects,
    fork_bomb,
    host_writes,
    kernel,
    kill_server,
    pickle_command,
    pickle_injection,
    read_files,
    secret_paths,
    system_and_popen,
)
from tests.cudaopt_mcp.jail_attack_kit.processes import (
    Listeners,
    alive,
    children_named,
    descendants,
    listeners,
    proc_table,
    wait_gone,
    with_comm,
)
from tests.cudaopt_mcp.jail_attack_kit.sessions import (
    Attack,
    HttpServer,
    Session,
    decode_npy,
    http_session,
    inprocess_session,
    server_args,
    server_env,
    stdio_session,
)
from tests.cudaopt_mcp.jail_attack_kit.tasks import (
    CASE,
    JAILBOX_BASELINE,
    JAILBOX_REFERENCE,
    LEAK_BYTES,
    ROOT,
    TWIN_BASELINE,
    TWIN_CASE,
    TWIN_N,
    TWIN_REFERENCE,
    N,
    jailbox_task,
    twin_task,
)
from tests.cudaopt_mcp.jail_attack_kit.worker_attacks import (
    SCAN_OUTPUTS,
    TWIN_KERNEL,
    baseline,
    frame_then_hang,
    hung_kernel,
    loot_thread,
    macro_explosion,
    nested_answer,
    swap_outputs_for_links,
    twin_toctou,
)

__all__ = [
    "Attack",
    "CASE",
    "ENV_DUMP",
    "FREEZE_JAIL_INIT",
    "Hole",
    "HttpServer",
    "JAILBOX_BASELINE",
    "JAILBOX_REFERENCE",
    "KERNEL",
    "LEAK_BYTES",
    "Listeners",
    "N",
    "PRELUDE",
    "ROOT",
    "SCAN_OUTPUTS",
    "Secrets",
    "Session",
    "TWIN_BASELINE",
    "TWIN_CASE",
    "TWIN_KERNEL",
    "TWIN_N",
    "TWIN_REFERENCE",
    "alive",
    "baseline",
    "c_bytes",
    "c_str",
    "children_named",
    "connects",
    "decode_npy",
    "descendants",
    "fork_bomb",
    "frame_then_hang",
    "hole",
    "host_writes",
    "http_session",
    "hung_kernel",
    "inprocess_session",
    "jailbox_task",
    "kernel",
    "kill_server",
    "listeners",
    "loot_thread",
    "macro_explosion",
    "make_secrets",
    "nested_answer",
    "pickle_command",
    "pickle_injection",
    "proc_table",
    "read_files",
    "secret_hits",
    "secret_paths",
    "server_args",
    "server_env",
    "stdio_session",
    "swap_outputs_for_links",
    "system_and_popen",
    "twin_task",
    "twin_toctou",
    "wait_gone",
    "with_comm",
]
