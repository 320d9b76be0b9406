"""The ``cudaopt`` command: ``optimize``, ``eval``, ``profile``, ``sanitize``, ``serve``, ``doctor``."""
