"""Processes around candidate code: the worker and its message frames, the jail and its limits, scratch folders, timing."""
