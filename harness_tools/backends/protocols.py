"""What an execution backend is, as Protocols, and what it offers, as data (:class:`BackendTraits`).

Callers ask a backend's traits (known without starting it: :func:`harness_tools.backends.backend_traits`)
or test ``isinstance(backend, RaceChecker)``; they never branch on a backend's name.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from harness_tools.backends.contract import CaseRequest, CaseRun, DeviceInfo, RaceReport


class BackendTraits(BaseModel):
    """What a backend offers and how its numbers read; a class attribute of every backend."""

    clock: str = Field(description="what its timings measure, for people: 'CUDA events', 'CPU wall clock'")
    default_warmup: int = Field(description="warm-up launches per performance case when none are asked for")
    default_reps: int = Field(description="timed launches per performance case when none are asked for")
    profiler: bool = Field(description="Nsight Compute can profile its launches")
    timing_note: str | None = Field(None, description="what its timings do not mean, for people and models")
    buffers_in_host_memory: bool = Field(description="its kernels' buffers live in host memory (a case must fit "
                                                     "the host's free memory), not in a device's")
    min_gain: float = Field(description="the smallest relative gain that counts as progress: below it lies the "
                                        "drift between evaluations of identical code measured on this backend "
                                        "(docs/benchmarks.md, false progress)")
    sure_gain: float | None = Field(None, description="a gain so far beyond that drift that no re-measurement could "
                                    "undo it: a challenger whose whole interval lies this far below the best's is "
                                    "crowned on its own evaluation, without a head-to-head; None: always head-to-head")
    sanitizer: Literal["compute-sanitizer", "race-check"] = Field(
        description="how `sanitize` checks a candidate: NVIDIA's compute-sanitizer on the GPU, or the "
                    "guarded-buffer run plus ThreadSanitizer race check of the cpu backend")
    compares_on_device: bool = Field(False, description="it honours ArgSpec.check: outputs are compared where they "
                                                        "lie, with a reference it holds, and not downloaded")


@runtime_checkable
class ExecutionBackend(Protocol):
    """Runs one case of a compiled candidate.

    Failure behaviour: the kernel's own failures (launch errors, crashes, hangs past the timeout,
    invalid launch configurations) come back as a :class:`CaseRun` with that status and the error
    name, and the backend is usable again for the next request. Only a backend that cannot work on
    this machine raises (:class:`~harness_tools.errors.BackendUnavailable`).
    """

    name: str
    traits: ClassVar[BackendTraits]

    def device_info(self) -> DeviceInfo: ...

    def run_case(self, request: CaseRequest, timeout_s: float) -> CaseRun: ...

    def close(self) -> None: ...


@runtime_checkable
class RaceChecker(Protocol):
    """A backend that can run one launch under a data-race detector.

    Failure behaviour: races found, or a check that could not run, are data in the :class:`RaceReport`
    (status ``races`` / ``error``); nothing raises for the kernel's sake.
    """

    def race_check(self, request: CaseRequest, timeout_s: float) -> RaceReport: ...
