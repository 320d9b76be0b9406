"""The bundled gemm_bf16_wgmma task: it has gemm_bf16's contract (params, sizes and their rules, cases, hidden
cases, reference, metrics, tolerance, baseline), its baseline passes the cpu cases, the cpu backend refuses the
wgmma kernel (inline PTX), every point of its space compiles for sm_90a with real NVRTC and no spills, and on a
GPU the kernel passes validation and hidden shapes at three configurations."""

from __future__ import annotations

import pytest

from harness_tools import evaluate
from harness_tools.check.hidden_shapes import hidden_shapes, hidden_task
from harness_tools.compile import compile_candidate
from harness_tools.evaluation import EvaluationConfig
from harness_tools.run.timing import TimingPlan
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task
from harness_tools.task.tunable_space import TunableSpace

NAME = "gemm_bf16_wgmma"
CONFIG_WIDE = {"BN": 256, "STAGES": 4, "GROUP_M": 8, "MINB": 1}
CONFIG_TWO_BLOCKS = {"BN": 128, "STAGES": 3, "GROUP_M": 16, "MINB": 2}
CONFIG_SHALLOW = {"BN": 128, "STAGES": 2, "GROUP_M": 1, "MINB": 1}


def space_of(task) -> TunableSpace:
    return TunableSpace(task.spec.tunables.params, task.spec.tunables.constraints)


def test_the_task_has_the_contract_of_gemm_bf16_and_a_valid_space():
    task, plain = resolve_task(NAME), resolve_task("gemm_bf16")
    spec, other = task.spec, plain.spec
    for field in ("params", "sizes", "size_rules", "cases", "hidden", "reference", "metrics", "tolerance",
                  "kernel_name"):
        assert getattr(spec, field) == getattr(other, field), field
    assert spec.baseline == other.baseline
    assert task.read(spec.baseline.source) == plain.read(other.baseline.source)
    assert task.read(spec.reference.file) == plain.read(other.reference.file)
    assert spec.tunables.options == ["--arch-specific"]
    assert {c.name for c in spec.cases_for(["performance"], "cuda")} == {
        "perf_4096x4096x4096", "perf_8192x8192x8192", "perf_4096x14336x4096"}
    space = space_of(task)
    assert not space.problems
    for config in (CONFIG_WIDE, CONFIG_TWO_BLOCKS, CONFIG_SHALLOW):
        assert space.is_valid(space.key(config)), config
    for backend in ("cpu", "cuda"):
        shapes = hidden_shapes(spec, backend)
        assert len(shapes) >= 6
        assert all(spec.size_rules.problem(s.case.sizes) is None for s in shapes)


def test_the_baseline_passes_its_cpu_cases(cpu_backend):
    task = resolve_task(NAME)
    result = evaluate(task, candidates.baseline(task), cpu_backend,
                      EvaluationConfig(seed=7, timing=TimingPlan(warmup=0, reps=2), timeout_s=300))
    assert result.correct, result.failure
    assert {c.name for c in result.cases if c.role == "performance"} == {"perf_cpu_256x256x256"}
    hidden = evaluate(hidden_task(task, hidden_shapes(task.spec, "cpu")), candidates.baseline(task), cpu_backend,
                      EvaluationConfig(roles=["validation"], seed=8, timeout_s=300))
    assert hidden.correct, hidden.failure


def test_the_cpu_backend_refuses_the_wgmma_kernel(cpu_backend):
    task = resolve_task(NAME)
    result = evaluate(task, candidates.tuned(task, CONFIG_WIDE), cpu_backend,
                      EvaluationConfig(roles=["validation"], seed=1, timeout_s=60))
    assert not result.correct and result.score_ms is None
    first = result.cases[0]
    assert first.run.error == "CPU_UNSUPPORTED", (first.status, first.run)
    assert "inline PTX `asm` cannot run on the CPU" in first.run.message, first.run.message


def test_every_point_compiles_for_sm_90a_without_spills():
    task = resolve_task(NAME)
    space = space_of(task)
    points = [space.as_dict(v) for v in space.valid()]
    assert 20 <= len(points) <= 64  # small enough to compile every point
    for config in points:
        result = compile_candidate(candidates.tuned(task, config), "sm_90")
        assert result.ok and result.arch == "sm_90a", (config, result.log)
        r = result.resources
        assert r is not None and r.registers is not None, (config, result.log)
        assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, (config, r)
        assert r.registers * 256 * config["MINB"] <= 65536, (config, r.registers)
        # ptxas says so when it serializes wgmma (registers it cannot keep in flight, and the like)
        assert "wgmma" not in result.full_log.lower(), (config, result.full_log)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [CONFIG_WIDE, CONFIG_TWO_BLOCKS, CONFIG_SHALLOW],
                         ids=["128x256_4stages", "128x128_3stages_2blocks", "128x128_2stages"])
def test_the_wgmma_kernel_passes_on_the_gpu(cuda_backend, config):
    task = resolve_task(NAME)
    cand = candidates.tuned(task, config)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"], seed=12, timeout_s=300))
    assert result.correct, result.failure
    assert result.compile.arch == "sm_90a"
    assert result.compile.resources.spill_store_bytes in (0, None)
    hidden = evaluate(hidden_task(task, hidden_shapes(task.spec, "cuda")), cand, cuda_backend,
                      EvaluationConfig(roles=["validation"], seed=13, timeout_s=300))
    assert hidden.correct, hidden.failure
