"""``python -m cudaopt_mcp.cli``: the ``cudaopt`` command without the console script."""

from cudaopt_mcp.cli.main import console

console()
