"""The one exception tree of the engine.

Expected kernel failures (compile errors, wrong answers, crashes, timeouts) are *data* in results and
never raise. These exceptions are for bad input and for broken environments::

    HarnessError
    ├── TaskSpecError          a task folder or inline spec is invalid (names file and field)
    ├── ExpressionError        a size/launch expression cannot be parsed or evaluated
    ├── CandidateError         a candidate is malformed (bad define, forbidden option, bad launch)
    ├── CompilerUnavailable    NVRTC cannot be loaded (the message says which package to install)
    ├── BackendError           an execution backend cannot be used here
    │   └── BackendUnavailable    e.g. no GPU / no driver; the message says what to do
    ├── WorkerError            the worker process broke in a way that is not the kernel's fault
    ├── LaunchPrepError        (wrapped_launch) a case cannot be prepared for ncu / compute-sanitizer
    ├── ProfileParseError      (ncu_csv) text that is not an Nsight Compute CSV
    └── defined by the MCP side on the same base:
        RunError, StepRefused  (cudaopt_mcp) unknown ids, refused requests
        SessionError           (client) the server refused a call or cannot be reached
        ProposerUnavailable    (client) a proposer cannot be created here (missing extra, API key)
        PromptMissing          (prompts) a template file is missing
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of every error the engine raises on purpose."""


class TaskSpecError(HarnessError):
    """A task spec is invalid; the message names the file, the field and what is wrong."""

    def __init__(self, file: str, field: str, problem: str):
        self.file, self.field, self.problem = file, field, problem
        super().__init__(f"{file}: {field}: {problem}")


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
