"""An example task as Kernel Tuner sees it (for ``kernel_tuner_examples.py``): its valid configurations, kernel
arguments drawn like cudaopt's inputs, launch dimensions, the tuning problem, and an answer with a verify function
from the task's own float64 reference and tolerance."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def load_task(example: str):
    from harness_tools import resolve_task

    return resolve_task(str(ROOT / "examples" / example))


def perf_sizes(task) -> dict[str, int]:
    """The GPU performance case (role performance, backends ["cuda"])."""
    return task.spec.cases_for(["performance"], "cuda")[0].sizes


def valid_configs(task) -> list[dict[str, int]]:
    from harness_tools.task.tunable_space import TunableSpace

    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    return [space.as_dict(c) for c in space.valid()]


def seeded_configs(task, n: int, seed: int) -> list[dict[str, int]]:
    """N valid configurations by a fixed seed (the dry run's stand-in for the ones cudaopt proposes)."""
    configs = valid_configs(task)
    return random.Random(seed).sample(configs, min(n, len(configs)))


def value(expr, sizes: dict) -> int | float:
    from harness_tools.task.expressions import evaluate_expression

    return evaluate_expression(expr, sizes)


def signature(task) -> list[str]:
    """Argument names of the tuned kernel: the first launch's args for a sequence, else the non-constant params."""
    tun = task.spec.tunables
    if tun.launches:
        return [a for a in tun.launches[0].args if isinstance(a, str)]
    return [p.name for p in task.spec.params if getattr(p, "constant", None) is None]


def arg_specs(task, sizes: dict, configs: list[dict]) -> dict[str, dict]:
    """name -> {dtype, shape, role, init, constant} for every buffer/scalar/scratch the kernel or KT needs.
    A scratch buffer is sized for the largest configuration (KT allocates one argument list for all)."""
    specs = {}
    for p in task.spec.params:
        if p.kind == "scalar":
            specs[p.name] = {"dtype": p.dtype, "scalar": value(p.value, sizes), "role": "in"}
        else:
            specs[p.name] = {"dtype": p.dtype, "shape": tuple(int(value(s, sizes)) for s in p.shape), "role": p.role,
                             "init": p.init, "constant": getattr(p, "constant", None)}
    for s in task.spec.tunables.scratch or []:
        count = max(int(value(s.count, {**sizes, **c})) for c in configs)
        specs[s.name] = {"dtype": s.dtype, "shape": (count,), "role": "scratch", "init": None, "constant": None}
    return specs


def draw(spec: dict, rng: np.random.Generator):
    """One argument: a numpy scalar, zeros for outputs and scratch, the task's distribution for inputs."""
    dtype = np.dtype(spec["dtype"])
    if "scalar" in spec:
        return dtype.type(spec["scalar"])
    init = spec["init"]
    if spec["role"] in ("out", "scratch") or init is None:
        return np.zeros(spec["shape"], dtype)
    if init.dist == "normal":
        return (rng.standard_normal(spec["shape"], dtype=np.float32) * init.std + init.mean).astype(dtype, copy=False)
    if init.dist == "uniform":
        return (rng.random(spec["shape"], dtype=np.float32) * (init.high - init.low) + init.low).astype(dtype, copy=False)
    raise ValueError(f"init {init.dist} not handled here")


def launch_dims(task, config: dict, sizes: dict):
    """(grid, block) exactly as the engine launches the tuned kernel (its first launch for a sequence)."""
    from harness_tools.task import candidate as candidates

    grid, block, _ = candidates.tuned(task, config).launch_dims(sizes)
    return tuple(grid), tuple(block)


def kt_problem(task, configs: list[dict], arrays: dict | None = None) -> dict:
    """tune_kernel's keyword arguments for ``configs`` on the GPU performance case (arrays: drawn ones, or
    None for the dry run, which puts the specs in their place)."""
    tun, sizes = task.spec.tunables, perf_sizes(task)
    specs = arg_specs(task, sizes, configs)
    allowed = {tuple(sorted(c.items())) for c in configs}
    names = list(tun.params)
    pick = arrays if arrays is not None else specs
    def restriction(*values) -> bool:  # a def (KT rewrites lambdas from their source); KT passes one dict, or
        p = values[0] if isinstance(values[0], dict) else dict(zip(names, values))  # values when one param
        return tuple(sorted((k, p[k]) for k in names)) in allowed

    defines = [f"-D{k}={int(value(v, sizes))}" for k, v in (task.spec.size_defines or {}).items()]
    return {
        "kernel_name": (tun.launches[0].kernel if tun.launches else tun.kernel) or task.spec.kernel_name,
        "kernel_source": task.read(tun.source),
        "problem_size": lambda p: launch_dims(task, {k: p[k] for k in names}, sizes)[0],  # the grid itself
        "grid_div_x": [], "grid_div_y": [],
        "arguments": [pick[n] for n in signature(task)],
        "tune_params": {k: list(v) for k, v in tun.params.items()},
        "restrictions": restriction,
        "cmem_args": {s["constant"]: pick[n] for n, s in specs.items() if s.get("constant")} or None,
        "compiler_options": ["-std=c++17", *defines],
        "lang": "cupy", "strategy": "brute_force", "quiet": True,
    }


def tolerance(task, sizes: dict, dtype: str) -> tuple[float, float]:
    tol = task.spec.tolerance[dtype]
    return float(value(tol.atol, sizes)), float(value(tol.rtol, sizes))


def reference_outputs(task, sizes: dict, arrays: dict) -> dict:
    """reference.py in float64: on the GPU with CuPy standing in for numpy when that works, else on the host."""
    ins = {p.name: arrays[p.name] for p in task.spec.params if p.kind == "buffer" and p.role != "out"}
    ref = task.spec.reference
    module_spec = importlib.util.spec_from_file_location("kt_reference", task.folder / ref.file)
    try:
        import cupy as cp

        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        if hasattr(module, "np"):
            module.np = cp
        out = getattr(module, ref.function)({n: cp.asarray(a).astype(cp.float64) for n, a in ins.items()}, sizes)
        out = {k: cp.asnumpy(cp.asarray(v)) for k, v in out.items()}
        cp.get_default_memory_pool().free_all_blocks()  # the float64 copies: give the GPU back to the tuning
        return out
    except Exception as exc:  # noqa: BLE001 - any failure on the GPU path: the host path is the definition
        print(f"reference on the GPU failed ({exc!r}); NumPy on the host", file=sys.stderr)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        return getattr(module, ref.function)({n: a.astype(np.float64) for n, a in ins.items()}, sizes)


def answer_and_verify(task, arrays: dict):
    """(answer, verify) for the tuned kernel's arguments: every output compared in float64 with the task's
    atol + rtol·|ref|; for a launch sequence the first kernel's scratch must add up to the reference output."""
    sizes, sig = perf_sizes(task), signature(task)
    expected = reference_outputs(task, sizes, arrays)
    if task.spec.tunables.launches:  # reduction: partial sums of the first kernel against the total
        (total,) = expected.values()
        scratch = task.spec.tunables.scratch[0].name
        answer = [np.asarray(total, np.float64).reshape(-1) if n == scratch else None for n in sig]
        dtypes = [task.spec.tunables.scratch[0].dtype if a is not None else None for a in answer]
        reduce_to = np.sum
    else:
        answer = [np.asarray(expected[n], np.float64).reshape(arrays[n].shape) if n in expected else None for n in sig]
        dtypes = [arrays[n].dtype.name if a is not None else None for n, a in zip(sig, answer)]
        reduce_to = None
    tols = [tolerance(task, sizes, d) if d else None for d in dtypes]

    def verify(answer, result_host, atol=None):
        for ref, got, tol in zip(answer, result_host, tols):
            if ref is None:
                continue
            got = np.asarray(got, np.float64)
            got = np.array([reduce_to(got)]) if reduce_to else got.reshape(ref.shape)
            if not (np.isfinite(got).all() and (np.abs(got - ref) <= tol[0] + tol[1] * np.abs(ref)).all()):
                return False
        return True

    return answer, verify
