"""``python -m cudaopt_mcp.server``: the MCP server without the console script."""

import sys

from cudaopt_mcp.server.app import main

sys.exit(main())
