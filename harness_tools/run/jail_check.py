"""A live check of the jail: run a probe inside a real jail spec and see what it can reach.

``cudaopt doctor`` prints these checks; the tests assert them. Each check is something a hostile kernel
would try: read a file of the host, reach a service on the host's loopback, see the caller's secrets in
its environment, see other processes, write outside its scratch folder.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

from harness_tools.run import jail
from harness_tools.run.jail import JailSpec

_PROBE = r"""
import json, os, socket, sys
args = json.loads(sys.argv[1])
out = {}
try:
    out["host_file"] = open(args["secret_file"]).read()
except OSError as exc:
    out["host_file"] = None
try:
    s = socket.create_connection(("127.0.0.1", args["port"]), timeout=2)
    s.close()
    out["host_loopback"] = True
except OSError:
    out["host_loopback"] = False
out["interfaces"] = [name for _, name in socket.if_nameindex()]
out["secret_env"] = sorted(k for k in os.environ if k in args["secret_names"] or args["secret_value"] in os.environ[k])
out["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
def writes(path):
    try:
        with open(os.path.join(path, ".cudaopt-probe"), "w") as f:
            f.write("x")
        os.unlink(os.path.join(path, ".cudaopt-probe"))
        return True
    except OSError:
        return False
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
out["ptrace"] = libc.ptrace(0, 0, 0, 0) == 0  # PTRACE_TRACEME: harmless, and denied by the filter
out["writes_scratch"] = writes(args["scratch"])
out["writes_engine"] = writes(args["engine"])
print(json.dumps(out))
"""


class JailCheck(BaseModel):
    name: str
    ok: bool
    detail: str


def check_jail(spec: JailSpec | None = None) -> list[JailCheck]:
    """Run the probe under ``spec`` (default: a worker's jail with a scratch folder of its own)."""
    secret_value = secrets.token_hex(16)
    names = ["CUDAOPT_MCP_TOKEN", "OPENAI_API_KEY"]
    with tempfile.TemporaryDirectory(prefix="cudaopt-doctor-") as host, \
            tempfile.TemporaryDirectory(prefix="cudaopt-doctor-scratch-") as scratch, socket.socket() as listener:
        secret_file = Path(host) / "secret.txt"
        secret_file.write_text(secret_value)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        spec = (spec or JailSpec(purpose="doctor")).with_paths(writable=[scratch])
        args = {"secret_file": str(secret_file), "port": listener.getsockname()[1], "secret_names": names,
                "secret_value": secret_value, "scratch": scratch, "engine": str(jail.ENGINE_DIR)}
        saved = {n: os.environ.get(n) for n in names}
        os.environ.update({n: secret_value for n in names if saved[n] is None})  # a secret to look for
        try:
            code, out, err = jail.run([sys.executable, "-P", "-c", _PROBE, json.dumps(args)], spec, 60)
        finally:
            for n, v in saved.items():
                if v is None:
                    os.environ.pop(n, None)
    if code != 0:
        return [JailCheck(name="probe", ok=False, detail=f"the probe failed in the jail (exit {code}): {err.strip()[-400:]}")]
    seen = json.loads(out)
    return [
        JailCheck(name="host files", ok=seen["host_file"] is None,
                  detail="a file outside the jail's folders is invisible" if seen["host_file"] is None
                  else "the probe read a file of the host"),
        JailCheck(name="network", ok=not seen["host_loopback"] and set(seen["interfaces"]) <= {"lo"},
                  detail=f"interfaces {seen['interfaces']}; the host's loopback services "
                         f"{'ARE reachable' if seen['host_loopback'] else 'are unreachable'}"),
        JailCheck(name="environment", ok=not seen["secret_env"],
                  detail="no token or API key inside" if not seen["secret_env"] else f"visible: {seen['secret_env']}"),
        JailCheck(name="processes", ok=len(seen["processes"]) <= 4,
                  detail=f"{len(seen['processes'])} process(es) visible (the jail's own)"),
        JailCheck(name="ptrace", ok=not seen["ptrace"],
                  detail="tracing processes is denied" if not seen["ptrace"] else "the probe may trace processes"),
        JailCheck(name="writes", ok=seen["writes_scratch"] and not seen["writes_engine"],
                  detail=f"scratch folder writable: {seen['writes_scratch']}; engine folder writable: {seen['writes_engine']}"),
    ]
