"""A thread that lives as long as the interpreter and runs the calls it is handed, one at a time.

Linux's ``PR_SET_PDEATHSIG`` fires when the *thread* that forked a child ends, not its process. Children started
with it must therefore be started from a thread that never ends: the jail's limited processes
(:mod:`harness_tools.run.jail_limits`) and a local Ray cluster's daemons (Ray sets it on its raylet and GCS when
``ray.init`` starts them). Started from a short-lived thread (anyio's idle out after 10 s, or a thread of one
evaluation), they were killed with it, in the middle of a run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class LastingThread:
    """Hands calls to one named daemon thread, started on the first call; :meth:`call` waits for the result."""

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in the lasting thread; its exception is raised here, in the caller's thread."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)  # a call from inside a call would wait for itself
        done: queue.Queue = queue.Queue(maxsize=1)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
        self._jobs.put((fn, args, kwargs, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            fn, args, kwargs, done = self._jobs.get()
            try:
                done.put((True, fn(*args, **kwargs)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                done.put((False, exc))
