"""The compiler child's jail: what its interpreter may spend before NVRTC runs."""

from __future__ import annotations

import os
import sys

import pytest

from harness_tools.compile.child import compiler_jail
from harness_tools.run import jail

pytestmark = pytest.mark.skipif(not jail.status().active, reason=f"no jail here: {jail.status().detail}")

THREADS_AFTER_NUMPY = ("import numpy, re; print(re.search(r'Threads:\\s+(\\d+)', open('/proc/self/status').read())"
                       ".group(1))")


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: OpenBLAS starts no thread of its own anyway")
def test_numpy_in_the_compiler_jail_starts_no_blas_threads():
    """OpenBLAS reserves buffers per thread, one per core, at import: on a 16-core host that took the whole of a
    512 MB compile memory limit and the child died at start ("OpenBLAS error: Memory allocation still failed")."""
    code, out, _ = jail.run([sys.executable, "-P", "-c", THREADS_AFTER_NUMPY], compiler_jail(), 60, merge=True)
    assert code == 0, out
    assert out.strip() == "1", out
