"""Probe code, run inside a jail by tests: it tries to start a process with fork and with subprocess and appends
what happened to ``said`` ("fork EPERM", "spawn ran", ...). The probe's own code must import errno, os, subprocess."""

SPAWN_ATTEMPTS = """
for name, start in (("fork", os.fork), ("spawn", lambda: subprocess.run(["/bin/true"]))):
    try:
        if start() == 0:
            os._exit(0)
        said.append(name + " ran")
    except OSError as exc:
        said.append(name + " " + errno.errorcode[exc.errno])
"""
