"""A run's report: plots, heatmaps and one self-contained HTML page, plus a compact markdown summary.

Between the server and the service: it reads run folders through the run store and never runs a kernel.
"""
