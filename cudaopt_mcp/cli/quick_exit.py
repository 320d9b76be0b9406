"""Leaving the ``cudaopt`` process once its work is done, without the interpreter's teardown.

After ``optimize`` the interpreter holds the MCP SDK's and pydantic's classes, numpy and our models: about 130,000
objects, whose module-by-module teardown took 0.27-0.30 s on a 2-core host, a tenth of a short tuning run's fixed
costs (issue 17). Everything a normal exit does that anyone can observe still happens, in the same order: other
threads that keep the process alive are waited for (when there is any, the normal exit runs instead, since
thread pools are stopped by the interpreter's own shutdown), the ``atexit`` handlers run (scratch folders
removed, the jail's sweep, logging flushed), then the standard streams are flushed; only freeing memory that the
operating system takes back anyway is skipped.

Only the console script uses it: :func:`cudaopt_mcp.cli.main.main` itself returns, so tests and embedders keep
their interpreter.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def quick_exit(code: int) -> None:
    """Exit with ``code``: at once after the atexit handlers, or the normal way while another thread must end."""
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # CPython's own exit runs these the same way; handlers registered by libraries too
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing more can reach it
            pass
    os._exit(code)
