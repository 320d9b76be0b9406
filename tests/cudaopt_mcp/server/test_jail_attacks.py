"""Hostile candidates against the jail, through MCP on the cpu backend: in-process, a real stdio server and
HTTP on 127.0.0.1 with a token.

Each test sends a candidate whose cpu-only branch (``#ifdef CUDAOPT_CPU_H``: NVRTC never sees it) is native
code run by the worker, checks that the payload really ran (``JX-BEGIN``/``JX-END`` in what it leaked), and
then that it stayed contained: no secret (a random token in a host file, ``CUDAOPT_MCP_TOKEN``,
``OPENAI_API_KEY`` of the server's environment) in any tool response, resource, server log, or file under
the results folder, and no side effect on the host. Whether the candidate is reported correct does not
matter. Payloads and servers: ``jail_attack_kit.py``.
"""

from __future__ import annotations

import errno
import os
import re
import secrets as random_tokens
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from harness_tools.backends.cpu.build import cache_root, kernel_cache, runtime_library
from harness_tools.run import jail
from tests.cudaopt_mcp import jail_attack_kit as kit

pytestmark = pytest.mark.skipif(not jail.status().active, reason=f"no jail here: {jail.status().detail}")


# ------------------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def secrets(tmp_path_factory) -> kit.Secrets:
    return kit.make_secrets(tmp_path_factory.mktemp("host-secrets"))


@pytest.fixture(scope="module")
def stdio(tmp_path_factory, secrets):
    # a small compile memory limit keeps the template-explosion test quick (g++ builds fit in it too)
    with kit.stdio_session(tmp_path_factory.mktemp("stdio"), secrets, CUDAOPT_COMPILE_MEMORY_MB="512") as session:
        yield session


@pytest.fixture(scope="module")
def inprocess(tmp_path_factory, secrets):
    with kit.inprocess_session(tmp_path_factory.mktemp("inprocess"), secrets) as session:
        yield session


@pytest.fixture(scope="module")
def http(tmp_path_factory, secrets):
    with kit.http_session(tmp_path_factory.mktemp("http"), secrets) as session:
        yield session


@pytest.fixture(params=["stdio", "inprocess"])
def session(request) -> kit.Session:
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["stdio", "inprocess", "http"])
def any_session(request) -> kit.Session:
    return request.getfixturevalue(request.param)


@pytest.fixture(params=["stdio", "http"])
def server_session(request) -> kit.Session:
    """Sessions with a server process of their own (one a payload could kill)."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def fresh_stdio(tmp_path, secrets):
    """A stdio server of the test's own (for attacks that wedge, kill or soil one), killed at the end."""
    with kit.stdio_session(tmp_path, secrets) as session:
        try:
            yield session
        finally:
            if session.server_pid and session.alive():
                jailed = kit.descendants(session.server_pid)
                os.kill(session.server_pid, signal.SIGKILL)
                kit.wait_gone(lambda: kit.alive(jailed), 5)


def contained(session: kit.Session, attack: kit.Attack, error: type[AssertionError] = AssertionError) -> None:
    hits = session.hits(*attack.texts, attack.leak, *attack.outputs.values())
    if hits:
        raise error(f"secrets reached the client, the log or the results folder: {hits}")


def leak_text(attack: kit.Attack) -> str:
    """What the payload wrote, JX-BEGIN to JX-END (the rest of the output is the kernel's own numbers)."""
    leak = attack.leak
    end = leak.find(b"JX-END")
    return (leak[: end + len(b"JX-END")] if end >= 0 else leak).decode(errors="replace")


# ------------------------------------------------------------------------------------------------ host code

@pytest.mark.parametrize("where", ["static", "kernel"])
def test_host_code_reads_the_secret_file(session, secrets, where):
    """fopen/open of a host file, also through /proc/*/root, /proc/*/cwd and /dev/fd: invisible."""
    paths = kit.secret_paths(secrets.file)
    others = ["/etc/shadow", "/root/.ssh/id_rsa", str(Path.home() / ".bash_history"), str(kit.ROOT / "pyproject.toml")]
    attack = session.attack(kit.kernel(kit.read_files([*paths, *others, "/etc/passwd"]), where=where))
    assert attack.ran, attack.result
    text = leak_text(attack)
    assert "F /etc/passwd: opened" in text  # positive control: reading works for what the jail shows
    for path in paths + others:
        assert f"F {path}: errno" in text, (path, text[:3000])
    if session.stderr:  # the payload's stderr and stdout reached the server's log, marked
        log = session.stderr_text()
        assert "JX-END" in log and "[worker output] JX-STDOUT" in log
    contained(session, attack)


@pytest.mark.parametrize("where", ["static", "kernel"])
def test_host_code_reads_the_servers_environment(any_session, secrets, where):
    """getenv of the token and the key, environ, /proc/*/environ of everything it can see: none of it is ours."""
    attack = any_session.attack(kit.kernel(kit.ENV_DUMP, where=where))
    assert attack.ran, attack.result
    text = leak_text(attack)
    assert "ENV PATH=" in text and "ENV HOME=/tmp" in text  # positive control: the environment was dumped
    assert "E CUDAOPT_MCP_TOKEN=(unset)" in text and "E OPENAI_API_KEY=(unset)" in text
    contained(any_session, attack)


def test_environment_dump_decoded_from_the_output(session, secrets):
    """Attack 5: the whole environment into the output buffer; the client decodes the kept .npy and finds
    only the jail's minimal environment."""
    attack = session.attack(kit.kernel("    for (char** e = environ; *e; ++e) { jx_puts(*e); jx_puts(\"\\n\"); }"))
    assert attack.ran
    env = dict(line.split("=", 1) for line in leak_text(attack).split("\n") if "=" in line and not line.startswith("JX"))
    assert env.get("HOME") == "/tmp" and "PATH" in env
    assert not set(env) & {"CUDAOPT_MCP_TOKEN", "OPENAI_API_KEY"}, sorted(env)
    assert not set(env) - set(jail.PASSED_ENV) - {"PATH", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH",
                                                  "CUDAOPT_CPU_RUNTIME", "PWD", "LANG", "SHLVL", "_"}, sorted(env)
    for value in secrets.values().values():
        assert value not in "\n".join(env.values())
    contained(session, attack)


def test_system_and_popen_start_no_shell(session, secrets, tmp_path):
    """system("cat SECRET > FILE") and popen: the cpu worker starts no process (its filter refuses the spawn), so no
    shell runs, in the jail or out of it, and no file appears on the host."""
    nonce = random_tokens.token_hex(6)
    host_out = [secrets.folder / f"jx-cat-{nonce}", tmp_path / f"jx-env-{nonce}", Path("/tmp") / f"jx-cp-{nonce}"]
    attack = session.attack(kit.kernel(kit.system_and_popen(secrets.file, host_out)))
    assert attack.ran
    text = leak_text(attack)
    assert "S system rc=" in text and "JX-POPEN-RAN" not in text, text  # both were tried; no shell ran
    if session.stderr:
        assert "JX-SYSTEM-RAN" not in session.stderr_text()
    created = [str(p) for p in host_out if p.exists()]
    for p in host_out:
        p.unlink(missing_ok=True)
    assert not created, f"a jailed shell wrote on the host: {created}"
    contained(session, attack)


def _snapshot(folders) -> dict[Path, tuple[int, int]]:
    out = {}
    for folder in folders:
        for path in Path(folder).rglob("*"):
            if path.is_file():
                st = path.stat()
                out[path] = (st.st_size, st.st_mtime_ns)
    return out


def test_host_code_writes_nowhere_on_the_host(session, secrets):
    """New files next to the secret, in the results folder, the run, the task folder, $HOME, the source tree,
    the engine package, the kernel cache, /tmp and /dev/shm; existing ones opened for writing (the secret,
    task.json, the engine, every cached kernel library it can see, the runtime): nothing lands on the host."""
    run_id = session.run_id()
    nonce = random_tokens.token_hex(6)
    new = [secrets.folder / f"jx-{nonce}", session.results / f"jx-{nonce}", session.results / run_id / f"jx-{nonce}",
           session.task / f"jx-{nonce}", Path.home() / f".jx-{nonce}", kit.ROOT / f"jx-{nonce}",
           jail.ENGINE_DIR / f"jx-{nonce}", kernel_cache() / f"jx-{nonce}.so", cache_root() / f"jx-{nonce}",
           Path(sys.prefix) / f"jx-{nonce}", Path("/tmp") / f"jx-{nonce}", Path("/dev/shm") / f"jx-{nonce}"]
    cached = sorted(kernel_cache().glob("*.so"))[:3]
    existing = [secrets.file, session.task / "task.json", jail.ENGINE_DIR / "__init__.py", runtime_library(), *cached]
    watched = [kernel_cache(), runtime_library().parent, session.task, secrets.folder]
    before = _snapshot(watched)
    attack = session.attack(kit.kernel(kit.host_writes(new, existing)))
    assert attack.ran
    text = leak_text(attack)
    assert re.search(r"W \S+/scratch/jx-inside-scratch: WROTE", text), text[:2000]  # positive control
    assert "jx-inside-inputs: WROTE" not in text  # inputs are read-only inside: the oracle's data stays intact
    assert "OPENED FOR WRITING" not in text, [line for line in text.splitlines() if "OPENED" in line]
    created = [str(p) for p in new if p.exists()]
    for p in new:
        if p.exists():
            p.unlink()
    assert not created, f"files written on the host: {created}"
    after = _snapshot(watched)
    changed = [str(p) for p, st in before.items() if after.get(p) != st]
    assert not changed, f"host files changed: {changed}"
    contained(session, attack)


def test_host_loopback_is_unreachable(any_session, secrets):
    """TCP to a listener on the host's 127.0.0.1 (and to the HTTP server itself), an abstract unix socket of
    the host's network namespace: nothing connects."""
    ears = kit.listeners()
    try:
        extra = [any_session.port] if any_session.port else []
        attack = any_session.attack(kit.kernel(kit.connects(ears.port, ears.abstract, extra)))
        assert attack.ran
        text = leak_text(attack)
        assert f"C 127.0.0.1:{ears.port} rc=-1" in text and f"U @{ears.abstract} rc=-1" in text, text[:2000]
        for port in extra:
            assert f"C 127.0.0.1:{port} rc=-1" in text
        assert "JX-CONNECTED" not in text
        time.sleep(0.2)
        assert ears.connections() == []
    finally:
        ears.close()
    contained(any_session, attack)


def test_host_code_cannot_kill_the_server(server_session, secrets):
    """The payload lists /proc, SIGKILLs whatever names the server, the server's pid as the host numbers it,
    and tries ptrace: it sees only its own jail and the server lives on."""
    s = server_session
    assert s.server_pid and s.alive()
    attack = s.attack(kit.kernel(kit.kill_server(s.server_pid, str(s.results))))
    assert attack.ran
    text = leak_text(attack)
    pids = [line for line in text.splitlines() if re.match(r"P \d+ ", line)]
    assert pids and len(pids) <= 4, pids  # positive control: /proc was listed, and holds only the jail
    assert str(s.results) not in "\n".join(pids)
    assert f"K host pid {s.server_pid} rc=-1" in text and "T attach host pid rc=-1" in text
    assert "T seize parent rc=-1" in text  # not even the jail's own init may be traced
    time.sleep(0.5)
    assert s.alive(), "the server was killed from inside the jail"
    again = s.attack(kit.baseline())
    assert again.result.get("correct"), again.result
    contained(s, attack)


def test_fork_bomb_is_bounded(stdio, secrets):
    """300 forks, each child sleeping 5 s: the cpu worker starts no process at all (its filter refuses fork and
    clone without CLONE_THREAD), so no child escapes the jail or outlives it, and the server evaluates the next
    candidate normally. This holds where no process limit can be set too (root without a cgroup: the GPU host's
    microVM, whose jail says "processes: not bounded" at start)."""
    comm = "jx" + random_tokens.token_hex(5)
    mark = len(stdio.stderr_text())
    try:
        attack = stdio.attack(kit.kernel(kit.fork_bomb(comm)))
        log = stdio.stderr_text()[mark:]
        found = re.search(r"FORK ok=(\d+) fail=(\d+) errno=(\d+)", log)
        assert found, log[-3000:]
        ok, err = int(found.group(1)), int(found.group(3))
        assert ok == 0 and err == errno.EPERM, found.group(0)
        left = kit.wait_gone(lambda: kit.with_comm(comm), 7)
        assert not left, f"forked children still running: {left}"
        after = stdio.attack(kit.baseline())
        assert after.result.get("correct"), after.result
        contained(stdio, attack)
    finally:
        # the children are zombies of the worker now, and count against its process limit until it ends
        stdio.reset_worker()


def test_symlinks_from_the_jail_are_not_followed(session, secrets):
    """A thread swaps each output file for a link to the secret as soon as the worker wrote it, and leaves
    links in scratch and /tmp: the server reads none of them and keeps none in the results folder."""
    extra, payload = kit.swap_outputs_for_links(secrets.file)
    mark = len(session.stderr_text())
    attack = session.attack(kit.kernel(payload, extra=extra, to_output=False))
    time.sleep(0.3)
    if session.stderr:
        assert "thread 0" in session.stderr_text()[mark:]  # the swapping thread started
    contained(session, attack)


def test_race_check_executable_is_jailed(stdio, secrets):
    """sanitize on the cpu backend runs the candidate as a TSan executable, in a jail of its own: the payload
    (only there: it looks for TSAN_OPTIONS) reads what it can, prints it and ends the run with exit code 7."""
    paths = kit.secret_paths(secrets.file)[:3]
    payload = ("    if (!getenv(\"TSAN_OPTIONS\")) return;\n    jx_puts(\"JX-RACE\\n\");\n" + kit.read_files(paths)
               + kit.ENV_DUMP + "    fwrite(jx_buf, 1, jx_len, stderr);\n    fflush(stderr);\n    _exit(7);")
    first = stdio.attack(kit.kernel(payload, to_output=False))
    assert first.result.get("correct"), first.result
    result = stdio.call("sanitize", run_id=stdio.run_id(), candidate_id=first.result["candidate_id"], timeout_s=120)
    record = stdio.read(f"cudaopt://runs/{stdio.run_id()}/candidates/{first.result['candidate_id']}/sanitize.json")
    text = result.model_dump_json() + record.decode(errors="replace")
    assert "exit code 7" in text, text[:3000]  # the payload ran under the race check (and ended it)
    contained(stdio, kit.Attack(result={}, texts=[text, *first.texts]))


# ------------------------------------------------------------------------------------------------ NVRTC

INCLUDE_TRICKS = {
    "quoted": '#include "{p}"',
    "angled": "#include <{p}>",
    "macro": '#define JX_P "{p}"\n#include JX_P',
    "digraph": '%:include "{p}"',
    "splice": '#inc\\\nlude "{p}"',
    "comment": '# /* x */ include "{p}"',
    "include_next": '#include_next "{p}"',
    "has_include": '#if __has_include("{p}")\n#error JX-PRESENT\n#endif',
    "cpu_only": '#ifdef CUDAOPT_CPU_H\n#include "{p}"\n#endif',
    "proc_root": '#include "/proc/self/root{p}"',
}


@pytest.mark.parametrize("trick", sorted(INCLUDE_TRICKS))
def test_include_tricks_do_not_read_the_secret(stdio, secrets, trick):
    source = INCLUDE_TRICKS[trick].format(p=secrets.file) + "\n" + kit.baseline()
    result = stdio.call("compile", run_id=stdio.run_id(), source=source)
    assert not (result.structured_content or {}).get("ok"), result.content
    attack = kit.Attack(result=result.structured_content or {}, texts=[result.model_dump_json()])
    contained(stdio, attack)


OPTION_TRICKS = {
    "pre_include": lambda s: (["--pre-include", str(s.file)], ""),
    "pre_include_eq": lambda s: ([f"--pre-include={s.file}"], ""),
    "dash_include": lambda s: (["-include", str(s.file)], ""),
    "include_path": lambda s: (["--include-path", str(s.folder)], '#include "secret.txt"\n'),
    "dash_I": lambda s: ([f"-I{s.folder}"], '#include "secret.txt"\n'),
}


@pytest.mark.parametrize("trick", sorted(OPTION_TRICKS))
def test_nvrtc_options_do_not_read_the_secret(stdio, secrets, trick):
    options, head = OPTION_TRICKS[trick](secrets)
    if any(len(o) > 64 for o in options):
        pytest.skip("the secret's path is longer than an option may be")
    result = stdio.call("compile", run_id=stdio.run_id(), source=head + kit.baseline(), options=options)
    assert not (result.structured_content or {}).get("ok"), result.content
    contained(stdio, kit.Attack(result={}, texts=[result.model_dump_json()]))


def test_nvrtc_template_explosion_is_stopped_and_the_next_compile_works(stdio):
    """Attack 4: 4**14 initialisers from 16 lines of macros need far more than the compile limit (512 MiB
    here): the compile fails quickly, and the next one works."""
    start = time.monotonic()
    boom = stdio.call("compile", run_id=stdio.run_id(), source=kit.macro_explosion())
    out = boom.structured_content or {}
    assert boom.is_error and not out.get("ok"), boom.content
    assert time.monotonic() - start < 60
    nxt = stdio.call("compile", run_id=stdio.run_id(), source=kit.baseline())
    assert (nxt.structured_content or {}).get("ok"), nxt.content


def test_nvrtc_memory_error_names_the_limit(stdio):
    """NVRTC stopped at its address-space limit said only 'catastrophic error: out of memory'; the compile
    error must name the limit that applied and its setting."""
    boom = stdio.call("compile", run_id=stdio.run_id(), source=kit.macro_explosion())
    out = boom.structured_content or {}
    assert not out.get("ok"), boom.content
    log = stdio.read(out["log_uri"]).decode(errors="replace") if out.get("log_uri") else ""
    message = f"{boom.model_dump_json()}\n{log}"
    assert "CUDAOPT_COMPILE_MEMORY_MB" in message, message[:2000]
    kit.hole("512 MiB" in message, f"the limit that applied was 512 MiB: {message[-600:]}")


def test_gxx_explosion_in_host_code_is_stopped_with_the_limit_named(stdio):
    """The same explosion where only g++ sees it: g++ stops at 512 MiB and the message says so."""
    attack = stdio.attack(kit.macro_explosion(cpu_only=True))
    text = "\n".join(attack.texts)
    assert not attack.result.get("correct")
    assert "512 MiB" in text and "CUDAOPT_COMPILE_MEMORY_MB" in text, attack.result
    after = stdio.attack(kit.baseline())
    assert after.result.get("correct"), after.result


# ------------------------------------------------------------------------------------------------ kill -9

def test_kill9_of_the_server_during_a_hung_kernel_leaves_no_jailed_process(tmp_path, secrets):
    """Attack 3: a stdio server runs an evaluate whose kernel spins forever; kill -9 of the server takes
    every process of the jail with it within 2 s."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    results, errlog_path = tmp_path / "results", tmp_path / "server-stderr.log"
    task = kit.jailbox_task(tmp_path / "tasks")
    params = StdioServerParameters(command=sys.executable, args=kit.server_args(results), env=kit.server_env(secrets),
                                   cwd=str(kit.ROOT))
    report: dict = {}

    async def main():
        with errlog_path.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as c:
                pid = next(p for p in kit.children_named(os.getpid(), "cudaopt_mcp.server")
                           if str(results) in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace"))
                run_id = (await c.call_tool("create_run", {"task": str(task)})).structured_content["run_id"]
                async with anyio.create_task_group() as tg:
                    async def hang():
                        try:
                            await c.call_tool("evaluate", {"run_id": run_id, "source": kit.hung_kernel(),
                                                           "roles": ["validation"], "timeout_s": 120})
                        except Exception as exc:  # noqa: BLE001 - the server is gone
                            report["call"] = repr(exc)

                    tg.start_soon(hang)
                    with anyio.fail_after(60):
                        while "JX-HUNG" not in errlog_path.read_text(errors="replace"):
                            await anyio.sleep(0.05)
                    jailed = kit.descendants(pid)
                    report["jailed"] = {p: Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                                        for p in jailed}
                    os.kill(pid, signal.SIGKILL)
                    killed = time.monotonic()
                    left = await anyio.to_thread.run_sync(lambda: kit.wait_gone(lambda: kit.alive(jailed), 2.0))
                    report["left"], report["after_s"] = left, time.monotonic() - killed
                    tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    except BaseException as exc:  # noqa: BLE001 - the client's teardown after its server died
        report.setdefault("teardown", repr(exc))
    finally:
        stray = kit.alive({p: kit.proc_table()[p][2] for p in map(int, report.get("jailed", {})) if p in kit.proc_table()})
        for p in stray:
            os.kill(p, signal.SIGKILL)
    workers = [cmd for cmd in report.get("jailed", {}).values() if "harness_tools.run.worker" in cmd]
    assert any("backends.cpu.executor" in cmd for cmd in workers), report  # the hung worker was found before the kill
    assert any("bwrap" in cmd for cmd in report["jailed"].values()), report
    assert report["left"] == {}, f"alive {report['after_s']:.1f} s after kill -9 of the server: {report['left']}"


# ------------------------------------------------------------------------------------------------ the worker's pipe
# Holes this suite found in the first jail (harness_tools/run/worker.py, jail.py, backends/cpu.py), fixed since:
# each test is the attack that got through.

def test_worker_answer_pipe_cannot_run_code_in_the_server(fresh_stdio, secrets, tmp_path):
    """Found: the parent unpickled whatever the worker wrote on its answer pipe (multiprocessing Connection),
    so kernel host code sent a pickle that ran os.system in the server, outside the jail, with the token and
    the key in its environment. The pipe now carries JSON frames."""
    stolen, env = tmp_path / "stolen-secret", tmp_path / "stolen-env"
    attack = fresh_stdio.attack(kit.kernel(kit.pickle_injection(f"cat {secrets.file} > {stolen}; env > {env}")))
    assert "P frame on fd" in fresh_stdio.stderr_text()  # the payload wrote its frame
    time.sleep(0.5)
    escaped = [str(p) for p in (stolen, env) if p.exists()]
    assert not escaped, f"the server ran the candidate's command outside the jail and wrote {escaped}"
    assert not attack.result.get("correct")
    assert fresh_stdio.attack(kit.baseline()).result.get("correct")  # a fresh worker takes over
    contained(fresh_stdio, attack)


def test_the_jail_init_cannot_be_frozen_from_inside(fresh_stdio):
    """Found: a candidate ptrace-attached the jail's init (bwrap, pid 1 of the jail, its parent) and left it
    stopped; when the worker later ended, bwrap could not, Worker.call's wait(timeout=30) raised
    TimeoutExpired uncaught, and every later evaluate waited 30 s and failed until a restart. Now ptrace is
    refused (seccomp), and a jail that does not end is killed."""
    frozen = fresh_stdio.attack(kit.kernel(kit.FREEZE_JAIL_INIT))
    assert frozen.ran, frozen.result
    assert "rc=-1 errno=1" in leak_text(frozen), leak_text(frozen)  # EPERM
    start = time.monotonic()
    ended = fresh_stdio.call("evaluate", wait_s=25, run_id=fresh_stdio.run_id(), roles=["validation"],
                             source=kit.kernel("    fflush(stdout); fflush(stderr); _exit(0);"))
    assert not (ended.structured_content or {}).get("correct")
    after = fresh_stdio.call("evaluate", wait_s=25, run_id=fresh_stdio.run_id(), source=kit.baseline(),
                             roles=["validation"])
    assert (after.structured_content or {}).get("correct"), after.content
    assert time.monotonic() - start < 20


def test_a_half_sent_answer_cannot_wedge_the_server(fresh_stdio):
    """Found: after poll() said the pipe was readable the parent blocked in recv() with no deadline, so a
    worker that sent 4 bytes of a length header and hung wedged the evaluation, and the server's engine
    lock, forever: timeout_s was not honoured. The whole answer must now arrive within the timeout."""
    started = time.monotonic()
    result = fresh_stdio.call("evaluate", wait_s=30, run_id=fresh_stdio.run_id(), source=kit.frame_then_hang(),
                              roles=["validation"], timeout_s=4)
    assert time.monotonic() - started < 15
    assert not (result.structured_content or {}).get("correct")
    after = fresh_stdio.call("evaluate", wait_s=30, run_id=fresh_stdio.run_id(), source=kit.baseline(),
                             roles=["validation"])
    assert (after.structured_content or {}).get("correct"), after.content


def test_a_deeply_nested_answer_is_a_protocol_error(fresh_stdio):
    result = fresh_stdio.call("evaluate", wait_s=40, run_id=fresh_stdio.run_id(), source=kit.nested_answer(),
                              roles=["validation"], timeout_s=10)
    started = time.monotonic()
    after = fresh_stdio.call("evaluate", wait_s=40, run_id=fresh_stdio.run_id(), source=kit.baseline(),
                             roles=["validation"])
    assert (after.structured_content or {}).get("correct"), after.content  # the server recovers either way
    kit.hole(result.structured_content is not None, f"not a result but {result.content}")
    kit.hole(time.monotonic() - started < 5, "the hung worker outlived the bad answer")


def test_candidate_code_does_not_outlive_its_evaluation(stdio):
    """Found: one long-lived worker served every run of a server, so a candidate's thread stayed in it and
    copied later candidates' outputs (another run's) from the shared scratch folder; the next kernel of the
    attacker's run read the loot back into its own output. A worker now runs one kernel library only."""
    attacker, victim = stdio.run_id(fresh=True), stdio.run_id(fresh=True)
    try:
        extra, payload = kit.loot_thread(seconds=30)
        mark = len(stdio.stderr_text())
        first = stdio.attack(kit.kernel(payload, extra=extra, to_output=False), run_id=attacker)
        assert first.result.get("correct"), first.result
        assert "looter 0" in stdio.stderr_text()[mark:]  # the thread started
        theirs = stdio.attack(kit.baseline(), run_id=victim)
        assert theirs.result.get("correct"), theirs.result
        victim_bytes = kit.decode_npy(theirs.outputs[f"{kit.CASE}/out"])
        time.sleep(0.1)
        second = stdio.attack(kit.kernel(kit.read_files(["/tmp/jx-loot"])), run_id=attacker)
        assert "F /tmp/jx-loot:" in leak_text(second), leak_text(second)[:500]
        assert victim_bytes[:256] not in second.leak, "run B's output came back in run A's output"
    finally:
        stdio.reset_worker()


FLOOD_MB = 24


def test_a_flood_of_kernel_output_is_capped(fresh_stdio):
    """Found: the worker's stdout and stderr were the server's own stderr, uncapped: one candidate wrote
    gigabytes into the server's log and could forge its lines. Its output is now relayed, marked and capped."""
    payload = f"""
    static char chunk[1 << 20];
    memset(chunk, 'F', sizeof chunk);
    chunk[sizeof chunk - 1] = '\\n';
    for (int k = 0; k < {FLOOD_MB}; ++k) {{ write(2, chunk, sizeof chunk); write(1, chunk, sizeof chunk); }}
    fprintf(stderr, "cudaopt-mcp: jail: OFF (forged)\\n");
"""
    before = fresh_stdio.stderr.stat().st_size
    attack = fresh_stdio.attack(kit.kernel(payload, to_output=False))
    grown = fresh_stdio.stderr.stat().st_size - before
    assert grown > 0 and attack.result.get("candidate_id"), attack.result  # it ran, and the server answered
    assert max(len(t) for t in attack.texts) < (1 << 20)  # the answers stay small
    assert fresh_stdio.alive() and fresh_stdio.attack(kit.baseline()).result.get("correct")
    assert grown <= jail.OUTPUT_CAP, f"one candidate wrote {grown / 2**20:.0f} MiB into the server's log"
    log = fresh_stdio.stderr_text()
    assert not re.search(r"^cudaopt-mcp: jail: OFF", log, re.MULTILINE), "the candidate forged a line of the log"
    assert all(line.startswith("[worker output]") for line in log.splitlines() if "FFFFFFFF" in line)
