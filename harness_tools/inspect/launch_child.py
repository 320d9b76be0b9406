"""Cases of one candidate, launched in a fresh process, for a tool that wraps the process (Nsight
Compute, compute-sanitizer): ``python -P -m harness_tools.inspect.launch_child REQUEST.pkl [REQUEST.pkl ...]``.

Each request file is a pickled :class:`~harness_tools.backends.contract.CaseRequest` dict written by
:mod:`harness_tools.inspect.launcher` (our own file, in our own scratch folder). A case runs exactly as
in the worker: one checked launch, then the request's timing plan (so a profiler can skip the first
launches and look at a warm one). Each outcome is printed as one JSON line on stdout; exit 0 when every
launch worked, 3 when one failed (the wrapping tool's own findings are what the caller reads). After a
failure that loses the CUDA context the remaining requests are not run.
"""

from __future__ import annotations

import json
import pickle
import sys


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m harness_tools.inspect.launch_child REQUEST.pkl [REQUEST.pkl ...]", file=sys.stderr)
        return 2
    from harness_tools.backends.cuda.executor import CudaExecutor  # imports the driver: this process only

    executor = CudaExecutor(0)
    failed = False
    for path in argv:
        with open(path, "rb") as handle:
            payload = pickle.load(handle)
        result = executor.run_case(payload)
        print(json.dumps({"request": path, **{k: result.get(k) for k in ("status", "error", "message")}}), flush=True)
        failed |= result.get("status") != "ok"
        if executor.dead:
            break
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
