"""``python -m cudaopt_mcp.cli``: the ``cudaopt`` command without the console script."""

import sys

from cudaopt_mcp.cli.main import main

sys.exit(main())
