"""Every compile a candidate needs for a set of cases, at once: one per distinct set of per-case ``size_defines``.

A task that #defines its sizes per case (convolution: image and filter sizes; matmul: WIDTH) needs one compile per
distinct case; compiled one after another they cost a configuration 8 × 0.19 s on convolution, against Kernel
Tuner's single compile of the one size it tunes for. Submitted together they run side by side on the compiler
pool (:mod:`harness_tools.compile.child`) and each case then finds its cubin in the cache.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness_tools.compile.child import compile_workers
from harness_tools.compile.nvrtc import CompileResult
from harness_tools.compile.program import compile_candidate
from harness_tools.errors import CandidateError
from harness_tools.task.candidate import Candidate, for_case
from harness_tools.task.spec import Case, Task


def case_variants(candidate: Candidate, task: Task, cases: list[Case]) -> list[Candidate]:
    """The distinct compiles of ``cases`` (in case order); a candidate that clashes with a size define has none."""
    if not task.spec.size_defines:
        return [candidate]
    seen: dict[str, Candidate] = {}
    for case in cases:
        try:
            variant = for_case(candidate, task, case.sizes)
        except CandidateError:
            return []
        seen.setdefault(variant.digest(), variant)
    return list(seen.values())


def compile_variants(candidate: Candidate, task: Task, cases: list[Case], arch: str,
                     timeout_s: float | None = None, urgent: bool = True) -> list[CompileResult]:
    """Compile every variant of ``cases`` in parallel (results in case order; cached ones return at once);
    ``urgent=False`` for compiles ahead (:func:`~harness_tools.compile.program.compile_candidate`)."""
    variants = case_variants(candidate, task, cases)
    if len(variants) <= 1:
        return [compile_candidate(v, arch, timeout_s=timeout_s, urgent=urgent) for v in variants]
    with ThreadPoolExecutor(min(len(variants), compile_workers()), thread_name_prefix="cudaopt-variants") as threads:
        return list(threads.map(lambda v: compile_candidate(v, arch, timeout_s=timeout_s, urgent=urgent), variants))
