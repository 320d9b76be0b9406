"""cudaopt: an MCP server and headless client that optimise CUDA kernels with the harness_tools engine."""

__version__ = "0.1.0"
