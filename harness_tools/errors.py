"""The one exception tree of the engine; the MCP side extends it in :mod:`cudaopt_mcp.errors`.

Expected kernel failures (compile errors, wrong answers, crashes, timeouts) are *data* in results and
never raise. These exceptions are for bad input and for broken environments::

    HarnessError
    ├── TaskSpecError          a task folder or inline spec is invalid (names file and field)
    ├── ExpressionError        a size/launch expression cannot be parsed or evaluated
    ├── CandidateError         a candidate is malformed (bad define, forbidden option, bad launch)
    ├── CompilerUnavailable    NVRTC cannot be loaded (the message says which package to install)
    ├── BackendError           an execution backend cannot be used here
    │   └── BackendUnavailable    e.g. no GPU / no driver / no jail; the message says what to do
    ├── WorkerError            a worker process broke in a way that is not the kernel's fault
    │   ├── WorkerTimeout         the child did not answer in time and was killed
    │   ├── WorkerDied            the child ended (or sent garbage) with a request in flight
    │   ├── FrameTimeout          a message frame did not arrive whole before its deadline
    │   └── BadFrame              the peer sent something that is not a frame of the protocol
    ├── Cancelled              the caller cancelled the work (its processes were killed)
    ├── LaunchPrepError        a case cannot be prepared for ncu / compute-sanitizer
    └── ProfileParseError      text that is not an Nsight Compute CSV
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of every error the engine raises on purpose."""


class TaskSpecError(HarnessError):
    """A task spec is invalid; the message names the file, the field and what is wrong."""

    def __init__(self, file: str, field: str, problem: str):
        self.file, self.field, self.problem = file, field, problem
        # "-": the problem is the file's or folder's as a whole, not one field's
        super().__init__(f"{file}: {problem}" if field == "-" else f"{file}: {field}: {problem}")


class ExpressionError(HarnessError):
    """An expression over sizes/tunables is not allowed or cannot be evaluated."""


class CandidateError(HarnessError):
    """A candidate is malformed before any compilation happens."""


class CompilerUnavailable(HarnessError):
    """NVRTC cannot be loaded on this machine."""


class BackendError(HarnessError):
    """An execution backend cannot serve the request."""


class BackendUnavailable(BackendError):
    """The backend cannot run on this machine (no GPU, no driver, missing package)."""


class WorkerError(HarnessError):
    """The worker process failed for a reason that is not the candidate's fault."""


class WorkerTimeout(WorkerError):
    """The child did not answer within the request's timeout and was killed."""


class WorkerDied(WorkerError):
    """The child process ended (or sent garbage) while a request was in flight."""


class FrameTimeout(WorkerError):
    """The whole frame did not arrive before the deadline."""


class BadFrame(WorkerError):
    """The peer sent something that is not a frame of this protocol."""


class Cancelled(HarnessError):
    """The caller cancelled the work: the processes running it were killed; nothing of it is a result."""


class LaunchPrepError(HarnessError):
    """The case cannot be launched as asked (no such case, compile error, bad launch); the message says why."""


class ProfileParseError(HarnessError):
    """The text is not an ncu CSV page (often an ncu error message); the message quotes its first lines."""


class ReferenceProcessError(HarnessError):
    """The reference process could not compute a case for a reason of its own (its traceback is the message), not
    the reference's: the caller computes the case in its own process instead."""
