"""The service over the run store: runs, candidates, evaluations, inspections and their views, as blocking
functions (no MCP here).
"""
