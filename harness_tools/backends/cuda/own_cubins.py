"""The executor's own kernels, compiled in threads from the worker's first moments (worker side).

NVRTC releases the GIL, so the executor's sources compile beside the CUDA context's creation instead of after it:
the helper kernels (:mod:`.device_kernels`, needed before the worker says it is ready) and the comparison kernels
(:mod:`.device_verifier`, 0.3-0.6 s of NVRTC on a 2-core host). These were compiled inside the first evaluation
that compared an output on the device: a search's baseline, typically, on its critical path. The sources are
ours, not a candidate's, so they compile in the worker itself (see :mod:`.device_kernels`).

The threads are not daemons: a process that exits while NVRTC is still compiling in one (a profiler's or a
sanitizer's launch child after a short case) would unload NVRTC under it and die of a segmentation fault. The
interpreter's exit waits for them instead (a fraction of a second at most); ``os._exit`` does not, and is safe.
"""

from __future__ import annotations

import threading

from harness_tools.compile.nvrtc import CompileResult, nvrtc_version, run_nvrtc
from harness_tools.errors import BackendError


class OwnCubin:
    """One of our sources compiling for ``arch`` in a thread; :meth:`cubin` waits for it."""

    def __init__(self, source: str, kernels: list[str], arch: str, what: str):
        self.what, self.arch = what, arch
        self._result: CompileResult | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._compile, args=(source, kernels, arch), daemon=False,
                                        name=f"cudaopt-nvrtc-{what.replace(' ', '-')}")
        self._thread.start()

    def _compile(self, source: str, kernels: list[str], arch: str) -> None:
        try:
            self._result = run_nvrtc(source, [f"--gpu-architecture={arch}", "-std=c++17"], arch, kernels,
                                     nvrtc_version())
        except Exception as exc:  # noqa: BLE001 - handed to whoever asks for the cubin, in its own thread
            self._error = exc

    def cubin(self) -> bytes:
        """The cubin, once compiled; BackendError with NVRTC's log if it did not compile."""
        self._thread.join()
        if self._error is not None:
            raise BackendError(f"the executor's {self.what} could not be compiled for {self.arch}: "
                               f"{self._error}") from self._error
        result = self._result
        if result is None or not result.ok or result.cubin is None:
            log = result.log if result is not None and result.log else "(NVRTC gave no log: is this NVRTC too old for it?)"
            raise BackendError(f"the executor's {self.what} did not compile for {self.arch}:\n{log}")
        return result.cubin
