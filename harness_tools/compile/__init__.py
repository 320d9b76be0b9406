"""NVRTC compilation of a candidate to a cubin, in a jailed child process, with a per-process cache.

``program`` is the caller's side (:func:`compile_candidate`); ``child`` the process that runs the compiler;
``nvrtc`` the compile itself; ``cubin`` reads entry points and parameter sizes from the result.
"""

from harness_tools.compile.nvrtc import PROGRAM_NAME, CompileResult, ResourceUsage, nvrtc_version
from harness_tools.compile.program import compile_candidate

__all__ = ["PROGRAM_NAME", "CompileResult", "ResourceUsage", "compile_candidate", "nvrtc_version"]
