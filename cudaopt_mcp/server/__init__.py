"""The MCP adapter only: tools, jobs (start-then-poll), resources, prompts and transports over :mod:`cudaopt_mcp.service`."""
