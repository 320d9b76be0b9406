"""The ``cpu`` backend: CUDA C built by g++ against the C++ runtime in ``runtime/``, run in a worker; a
ThreadSanitizer race check.
"""
