"""The headless client of ``cudaopt optimize``: the loop, its MCP session and the proposers; it imports the api,
never the service or server.
"""
