"""cudaopt's evaluation engine: task specs, NVRTC compile, execution backends, compare and timing.

Nothing in this package imports MCP. The process that imports it never creates a CUDA context:
only the worker process started by the ``cuda`` backend does.
"""

__version__ = "0.1.0"
