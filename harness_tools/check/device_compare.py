"""Which outputs of a case are compared on the device, and how the device's numbers become an OutputComparison.

The engine asks for a device comparison (ArgSpec.check) when the backend can do one
(``BackendTraits.compares_on_device``), the task has no custom check (that needs the outputs on the host) and
the output is large enough for the download to matter (``verify="auto"``: ``EvaluationConfig.device_compare_min_bytes``,
by default :data:`DEVICE_COMPARE_MIN_BYTES`) or every output is asked for (``verify="device"``). Smaller outputs are
downloaded and kept as evidence; a failure decided on the device is downloaded too when it is small enough
(``EVIDENCE_BYTES``).
The host comparison (:mod:`harness_tools.check.compare`) stays the definition of a verdict; the device's is
the same computation (docs/oracle.md, "comparing on the device").
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import numpy as np

from harness_tools.backends import backend_traits
from harness_tools.backends.contract import ArgSpec, CaseRun, DeviceCheck, DeviceComparison
from harness_tools.check.compare import Mismatch, OutputComparison
from harness_tools.check.device_reference import device_checks, form_state
from harness_tools.check.mismatch_map import bin_grid, from_counts
from harness_tools.check.reference import oracle_being_computed
from harness_tools.task.checking_rules import mismatch_budget
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.spec import BufferParam, Case, Task, TaskSpec

DEVICE_COMPARE_MIN_BYTES = 16 << 20
SEARCH_DEVICE_COMPARE_MIN_BYTES = 64 << 10  # a search step's: from here the device's comparison is the cheaper
# outputs this large at most are compared on the host rather than wait for a device form another thread is making
MEANWHILE_HOST_COMPARE_MAX_BYTES = 256 << 20

T = TypeVar("T")


class Once(Generic[T]):
    """A value computed on first call, then kept (the oracle: needed by the host comparison only). Started
    :meth:`meanwhile`, it is computed on a thread of its own while the caller goes on, and a call waits for it."""

    def __init__(self, make: Callable[[], T]):
        self._make, self._done, self._value = make, False, None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def meanwhile(self) -> None:
        """Compute it now on another thread (in the caller's context: its cancellation token included)."""
        if self._thread is None and not self._done:
            context = contextvars.copy_context()
            self._thread = threading.Thread(target=context.run, args=(self._compute,), name="cudaopt-oracle",
                                            daemon=True)
            self._thread.start()

    def _compute(self) -> None:
        try:
            self._value = self._make()
        except BaseException as exc:  # noqa: BLE001 - raised again to whoever asks for the value
            self._error = exc
        self._done = True

    def __call__(self) -> T:
        if self._thread is not None:
            self._thread.join()
        elif not self._done:
            self._compute()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def device_checks_for(task: Task, case: Case, seed: int, backend: str, verify: str,
                      expected: Callable[[], dict[str, np.ndarray]],
                      min_bytes: int = DEVICE_COMPARE_MIN_BYTES, wait: bool = True) -> dict[str, DeviceCheck] | None:
    """The outputs of ``case`` to compare on the device, with their checks (empty: all on the host).

    Not ``wait``: None instead of waiting while another thread makes the device form (a seed's draw made ahead
    computing its oracle), when the host can compare those outputs instead (``verify="auto"``, at most
    :data:`MEANWHILE_HOST_COMPARE_MAX_BYTES`): the caller then runs the case meanwhile and compares on the host."""
    spec = task.spec
    if verify == "host" or spec.check is not None or not backend_traits(backend).compares_on_device:
        return {}
    sizes = {b.name: _nbytes(b.dtype, spec.shape_of(b, case.sizes)) for b in spec.outputs}
    names = [name for name, size in sizes.items() if verify == "device" or size >= min_bytes]
    if not names:
        return {}
    if (not wait and verify == "auto" and sum(sizes[n] for n in names) <= MEANWHILE_HOST_COMPARE_MAX_BYTES
            and _pending(task, case, seed, names)):
        return None
    return device_checks(task, case, seed, names, expected)


def _pending(task: Task, case: Case, seed: int, names: list[str]) -> bool:
    """Whether another thread is making the device form of ``names`` (or the oracle it is made from) now."""
    state = form_state(task, case, seed, names)
    return state == "being made" or (state == "absent" and oracle_being_computed(task, case, seed))


def with_checks(args: list[ArgSpec], checks: Mapping[str, DeviceCheck]) -> list[ArgSpec]:
    return [a.model_copy(update={"check": checks[a.name]}) if a.name in checks else a for a in args]


def compared_on_device(run: CaseRun, spec: TaskSpec, sizes: dict[str, int]) -> dict[str, OutputComparison]:
    """The outputs the device decided, as the host comparison would report them."""
    out = {}
    for buf in spec.outputs:
        device = run.comparisons.get(buf.name)
        if device is not None and device.decided:
            out[buf.name] = as_output_comparison(device, buf, spec, sizes)
    return out


def as_output_comparison(device: DeviceComparison, buf: BufferParam, spec: TaskSpec,
                         sizes: dict[str, int]) -> OutputComparison:
    budget = mismatch_budget(buf, sizes)
    tolerance = spec.tolerance_for(buf.dtype)
    shape = spec.shape_of(buf, sizes)
    first = None
    if device.first_index is not None and device.first_got is not None and device.first_expected is not None:
        first = Mismatch(index=[int(x) for x in np.unravel_index(device.first_index, shape)],
                         flat_index=device.first_index, got=device.first_got, expected=device.first_expected)
    passed = device.nonfinite == 0 and device.mismatches <= budget
    mismatch_map = None
    if not passed and device.bin_mismatches is not None and device.bin_nonfinite is not None:
        mismatch_map = from_counts(bin_grid(shape), device.bin_mismatches, device.bin_nonfinite)
    return OutputComparison(buffer=buf.name, passed=passed,
                            elements=device.elements, mismatches=device.mismatches, max_abs_err=device.max_abs_err,
                            max_rel_err=device.max_rel_err, nonfinite=device.nonfinite, nans=device.nans,
                            infs=device.infs, first_mismatch=first,
                            atol=float(evaluate_expression(tolerance.atol, sizes)), rtol=float(tolerance.rtol),
                            max_mismatches=budget, compared_on="device", mismatch_map=mismatch_map)


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) * numpy_dtype(dtype).itemsize
