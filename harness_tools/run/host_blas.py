"""One thread at a time in this process's BLAS-heavy NumPy work (the oracle, task functions, the tuner's model).

NumPy's OpenBLAS hangs for good when the process forks while one of its threaded calls runs: its atfork handler
stops the library's threads under the call, which then waits for them forever (seen here as a sgemm oracle
spinning in ``exec_blas`` while ``cudaopt optimize`` started its jailed workers; two threads in BLAS at once can
hang it too, numpy#17752). So whoever multiplies matrices in the server's process (references, task generators
and checks, the tuner's Gaussian process) holds :data:`HOST_BLAS`, and so does whoever forks with a
``preexec_fn`` (the jail's spawner; a plain ``subprocess`` call vforks, which runs no atfork handler). It is
re-entrant, as a reference's computation calls the task's function.
"""

from __future__ import annotations

import threading

HOST_BLAS = threading.RLock()
