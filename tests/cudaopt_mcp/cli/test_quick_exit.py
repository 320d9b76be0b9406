"""The console script's quick exit: everything a normal exit does that can be observed still happens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as a user's shell has it
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path, env=env)


def test_atexit_handlers_run_buffered_output_arrives_and_the_code_is_kept(tmp_path):
    out = _python(f"""
        import atexit, logging, sys
        from pathlib import Path
        from cudaopt_mcp.cli.quick_exit import quick_exit
        atexit.register(lambda: Path({str(tmp_path / "handler-ran")!r}).write_text("yes"))
        logging.basicConfig(filename={str(tmp_path / "log.txt")!r}, level=logging.INFO)
        logging.getLogger("x").info("logged before the exit")
        for _ in range(100_000):  # small writes: the last of them wait in the stream's buffer
            sys.stdout.write("0123456789")
        sys.stderr.write("the last words")
        quick_exit(3)
        """, tmp_path)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "0123456789" * 100_000 and out.stderr.endswith("the last words")
    assert (tmp_path / "handler-ran").read_text() == "yes"
    assert "logged before the exit" in (tmp_path / "log.txt").read_text()


def test_a_thread_that_keeps_the_process_alive_is_waited_for(tmp_path):
    out = _python(f"""
        import threading, time
        from pathlib import Path
        from cudaopt_mcp.cli.quick_exit import quick_exit
        def work():
            time.sleep(0.5)
            Path({str(tmp_path / "thread-done")!r}).write_text("done")
        threading.Thread(target=work).start()
        quick_exit(0)
        """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "thread-done").read_text() == "done"


def test_the_command_line_leaves_through_it_with_its_whole_output(tmp_path):
    out = _python("""
        import sys
        from cudaopt_mcp.cli.main import console
        sys.argv = ["cudaopt", "tasks", "--json"]
        console()
        """, tmp_path)
    assert out.returncode == 0, out.stderr
    names = [t["name"] for t in json.loads(out.stdout)]
    assert "sgemm" in names
