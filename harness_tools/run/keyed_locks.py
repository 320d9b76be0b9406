"""One lock per key, for caches whose entries take long to make: a second caller of a key being made waits for
it instead of making it again (``cudaopt optimize`` draws a seed's inputs and oracle ahead, while the first
evaluation may already ask for them). A key's lock lives only while someone holds or waits for it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable, Iterator


class KeyedLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, int]] = {}  # key -> (lock, holders and waiters)

    @contextlib.contextmanager
    def held(self, key: Hashable) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def busy(self, key: Hashable) -> bool:
        """Whether someone holds (or waits for) ``key`` now: its entry is being made."""
        with self._guard:
            return key in self._locks
