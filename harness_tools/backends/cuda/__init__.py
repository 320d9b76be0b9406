"""The ``cuda`` backend: the parent side (no driver import) and the executor that owns the GPU context in the worker."""
