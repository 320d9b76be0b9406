"""The ``cudaopt`` command line: ``tasks``, ``eval``, ``serve`` and ``optimize``.

Exit codes: 0 success (for ``eval``: the candidate is correct; for ``optimize``: a correct candidate was
found), 1 not correct / none found, 2 bad input or an unusable environment (the message says which).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from cudaopt_mcp.cli.eval_report import eval_table
from cudaopt_mcp.cli.help_texts import command
from harness_tools import (
    EvaluationConfig,
    HarnessError,
    TimingPlan,
    available_backends,
    bundled_task_names,
    create_backend,
    evaluate,
    resolve_task,
)
from harness_tools.backends.cuda.backend import gpu_present
from harness_tools.task import candidate as candidates
from harness_tools.task.spec import LaunchSpec

log = logging.getLogger("cudaopt")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="cudaopt: %(message)s")
    if args.verbose > 1:  # our own DEBUG lines (each step's timings), the workers' too; not every library's
        for name in ("cudaopt", "cudaopt_mcp", "harness_tools"):
            logging.getLogger(name).setLevel(logging.DEBUG)
        os.environ.setdefault("CUDAOPT_LOG", "DEBUG")
    try:
        return args.func(args)
    except HarnessError as exc:
        print(f"cudaopt: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"cudaopt: error: {exc}", file=sys.stderr)
        return 2


def console() -> None:
    """The ``cudaopt`` console script: :func:`main`, then a quick exit (:mod:`cudaopt_mcp.cli.quick_exit`)."""
    from cudaopt_mcp.cli.quick_exit import quick_exit

    quick_exit(main())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudaopt", description="Optimise CUDA kernels: compile, check, time.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log progress to stderr; -vv: also each step's timings (DEBUG), the workers' included")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    tasks = command(sub, "tasks", "list the bundled tasks")
    tasks.add_argument("--json", action="store_true")
    tasks.set_defaults(func=_cmd_tasks)

    ev = command(sub, "eval", "compile, validate and time one candidate of a task")
    ev.add_argument("task", help="bundled task name or task folder")
    ev.add_argument("--kernel", type=Path, help="CUDA source file (default: the task's baseline)")
    ev.add_argument("--tuned", metavar="NAME=V,...", help="use the task's tunable kernel with these values")
    ev.add_argument("--launch", help='launch config as JSON, e.g. \'{"grid":["ceil_div(n,256)"],"block":[256]}\'')
    ev.add_argument("--launches", help='a launch sequence as JSON, e.g. \'[{"kernel":"partial","grid":[64],"block":[256],'
                                       '"args":["x","sums","n"]}, {"kernel":"final","grid":[1],"block":[64],'
                                       '"args":["sums","out"]}]\' (args: task params, scratch buffers, or '
                                       '{"value":EXPR,"dtype":"int32"})')
    ev.add_argument("--scratch", help='scratch buffers of the sequence as JSON, e.g. \'[{"name":"sums","dtype":"float32",'
                                      '"count":64}]\'')
    ev.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE", help="#define (repeatable)")
    ev.add_argument("--backend", choices=available_backends(), help="execution backend (default: cuda if a GPU is present)")
    ev.add_argument("--seed", type=int, help="input seed (default: fresh; always recorded)")
    ev.add_argument("--warmup", type=int, help="warm-up launches per performance case (default 10; cpu: 1)")
    ev.add_argument("--reps", type=int, help="timed launches per performance case (default 100; cpu: 10)")
    ev.add_argument("--no-flush", action="store_true", help="do not flush L2 between timed launches")
    ev.add_argument("--timeout", type=float, default=120.0,
                    help="seconds for the whole evaluation (compile and every case); a case still running then is killed")
    ev.add_argument("--only", choices=["validation", "performance"], help="run only cases of this role")
    ev.add_argument("--race-check", action="store_true",
                    help="cpu backend: run each passing validation case once more under ThreadSanitizer (CUDA threads "
                         "as fibers; only barriers, warp operations and atomics order them) and fail it on a data race")
    ev.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep artifacts here: kernel source, full compile log, outputs, result.json")
    ev.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ev.set_defaults(func=_cmd_eval)

    from cudaopt_mcp.server.options import add_serve_arguments  # no MCP import: the CLI stays light

    srv = command(sub, "serve", "run the MCP server (stdio by default, or streamable HTTP)")
    add_serve_arguments(srv)
    srv.set_defaults(func=_cmd_serve)

    for name, what in (("profile", "Nsight Compute summary of a stored candidate (cuda backend)"),
                       ("sanitize", "compute-sanitizer (cuda) or race check and guarded buffers (cpu) on a stored candidate")):
        cmd = command(sub, name, what)
        cmd.add_argument("run_id")
        cmd.add_argument("candidate_id")
        cmd.add_argument("--results", type=Path, default=Path("results"), help="run folders (default ./results)")
        cmd.add_argument("--backend", choices=available_backends(), help="default: cuda if a GPU is present, else cpu")
        cmd.add_argument("--case", action="append",
                         help="the performance case to profile (default: the first)" if name == "profile" else
                         "a validation case to check (repeatable; default: every validation case)")
        cmd.add_argument("--timeout", type=float, default=300.0, help="seconds before the tool is killed")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=_cmd_inspect, inspect=name)

    doc = command(sub, "doctor", "is candidate code jailed here? runs a probe in the jail and says what it could reach")
    doc.add_argument("--json", action="store_true")
    doc.set_defaults(func=_cmd_doctor)

    new = command(sub, "new", "start a task folder from a kernel file")
    new.add_argument("folder", type=Path, metavar="DIR")
    new.add_argument("--kernel", type=Path, required=True, metavar="FILE.cu", help="the kernel's source file")
    new.add_argument("--name", help="the task's name (default: the folder's)")
    new.add_argument("--kernel-name", help="which __global__ function, when the file has several")
    new.set_defaults(func=_cmd_new)

    sch = command(sub, "schema", "print the JSON Schema of a file format (task: task.json)")
    sch.add_argument("format", choices=["task"])
    sch.add_argument("--out", type=Path, help="write it to this file instead of standard output")
    sch.set_defaults(func=_cmd_schema)

    from cudaopt_mcp.cli.report_command import add_report_arguments, run_report

    rep = command(sub, "report", "a run's report: an HTML page of plots, SVG/PNG files and a markdown summary")
    add_report_arguments(rep)
    rep.set_defaults(func=run_report)

    from cudaopt_mcp.cli.optimize import add_optimize_arguments

    opt = command(sub, "optimize", "the autonomous loop: baseline, then proposals (LLM or tuner) evaluated "
                                          "through the MCP server")
    add_optimize_arguments(opt, available_backends())
    opt.set_defaults(func=_cmd_optimize)
    return parser


def _cmd_inspect(args: argparse.Namespace) -> int:
    from cudaopt_mcp.service.inspections import profile_step, sanitize_step
    from cudaopt_mcp.service.state import ServerConfig, ServerState

    state = ServerState.open(ServerConfig(results_dir=args.results, backend=args.backend, transport="inprocess"))
    try:
        if args.inspect == "profile":
            out = profile_step(state, args.run_id, args.candidate_id, (args.case or [None])[0], args.timeout)
            text, ok = out.summary_text or f"profile {out.status}: {out.reason}", out.available
        else:
            out = sanitize_step(state, args.run_id, args.candidate_id, None, args.case, args.timeout)
            text, ok = out.text, out.status == "clean"
    finally:
        state.close()
    print(out.model_dump_json(indent=2, exclude_none=True) if args.json else text)
    return 0 if ok else 1


def _cmd_new(args: argparse.Namespace) -> int:
    from harness_tools.compile.signature_check import checked_signature
    from harness_tools.task.loading import load_task
    from harness_tools.task.scaffold import write_task_folder
    from harness_tools.task.schema import SCHEMA_FILE

    kernel, params, how = checked_signature(args.kernel.read_text(), args.kernel_name)
    todo = write_task_folder(args.folder, args.kernel, args.name, kernel, schema=SCHEMA_FILE, signature=(kernel, params))
    load_task(args.folder)  # what it wrote loads
    shown = ", ".join(f"{p.dtype}{'*' if p.pointer else ''} {p.name}" for p in params)
    print(f"signature: {kernel}({shown}), {how}")
    print(f"wrote {args.folder}/task.json, reference.py and {args.kernel.name}; still to do:")
    for number, step in enumerate(todo, start=1):
        print(f"  {number}. {step}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from harness_tools.task.schema import schema_text

    if args.out is None:
        sys.stdout.write(schema_text())
    else:
        args.out.write_text(schema_text())
        print(f"cudaopt: wrote {args.out}", file=sys.stderr)
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when the jail is on and every probe check holds, 1 otherwise."""
    from harness_tools.run import jail
    from harness_tools.run.jail_check import check_jail

    state = jail.status()
    specs = [jail.JailSpec(purpose="cpu worker")]
    if gpu_present():
        specs.append(jail.JailSpec(purpose="cuda worker", gpu=True))
    checks = {spec.purpose: check_jail(spec) for spec in specs}
    ok = state.active and all(c.ok for group in checks.values() for c in group)
    if args.json:
        print(json.dumps({"jail": state.model_dump(), "ok": ok,
                          "checks": {k: [c.model_dump() for c in v] for k, v in checks.items()}}, indent=2))
        return 0 if ok else 1
    print(state.describe())
    for purpose, group in checks.items():
        for check in group:
            print(f"  {purpose:<12} {'ok  ' if check.ok else 'FAIL'} {check.name:<12} {check.detail}")
    print("the jail holds" if ok else "candidate code is NOT contained here: see the lines above")
    return 0 if ok else 1


def _cmd_optimize(args: argparse.Namespace) -> int:
    from cudaopt_mcp.cli.optimize import run_optimize

    return run_optimize(args)


def _cmd_serve(args: argparse.Namespace) -> int:
    from cudaopt_mcp.server.app import run_serve  # imports MCP only when serving

    return run_serve(args)


def _cmd_tasks(args: argparse.Namespace) -> int:
    rows = []
    for name in bundled_task_names():
        spec = resolve_task(name).spec
        rows.append({"name": name, "kernel": spec.kernel_name, "cases": len(spec.cases),
                     "tunables": sorted(spec.tunables.params) if spec.tunables else [],
                     "description": spec.description.split(". ")[0]})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<14} {r['cases']:>2} cases  tunables: {','.join(r['tunables']) or '-':<18} {r['description']}")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    task = resolve_task(args.task)
    cand = _candidate(task, args)
    backend_name = args.backend or _default_backend()
    on_cpu = backend_name == "cpu"
    roles = [args.only] if args.only else task.spec.default_roles(backend_name)
    if on_cpu and not args.only and "performance" not in roles:
        print("cudaopt: cpu backend: validation cases only (this task's performance sizes are meant for a GPU; "
              "--only performance times them anyway, in CPU time)", file=sys.stderr)
    warmup = args.warmup if args.warmup is not None else (1 if on_cpu else 10)
    reps = args.reps if args.reps is not None else (5 if on_cpu else 100)
    config = EvaluationConfig(
        seed=args.seed, timeout_s=args.timeout,
        timing=TimingPlan(warmup=warmup, reps=reps, flush_l2=not args.no_flush),
        roles=roles,
        outputs_dir=str(args.keep / "outputs") if args.keep else None,
        race_check=args.race_check,
    )
    _say_if_unjailed()
    backend = create_backend(backend_name)
    try:
        result = evaluate(task, cand, backend, config)
    finally:
        backend.close()
    if args.keep:
        _keep(args.keep, cand, result)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(eval_table(result))
    return 0 if result.correct else 1


def _keep(folder: Path, cand: candidates.Candidate, result) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(cand.source)
    (folder / "candidate.json").write_text(cand.model_dump_json(indent=2))
    (folder / "compile.log").write_text(result.compile.full_log)
    (folder / "result.json").write_text(result.model_dump_json(indent=2))


def _candidate(task, args: argparse.Namespace) -> candidates.Candidate:
    if args.tuned and args.kernel:
        raise ValueError("--tuned and --kernel exclude each other")
    if args.tuned:
        cand = candidates.tuned(task, _assignments(args.tuned.split(","), int))
    elif args.kernel:
        cand = candidates.from_kernel_source(task, task.spec.baseline, _read_kernel(args.kernel))
    else:
        cand = candidates.baseline(task)
    update: dict = {}
    if args.launch and args.launches:
        raise ValueError("--launch and --launches exclude each other")
    if args.launch:  # one launch replaces a sequence and its scratch buffers
        update.update(launch=LaunchSpec.model_validate(json.loads(args.launch)), launches=None, scratch=[])
    if args.launches:
        update.update(launch=None, launches=json.loads(args.launches))
    if args.scratch:
        update["scratch"] = json.loads(args.scratch)
    if args.define:
        update["defines"] = {**cand.defines, **_assignments(args.define, str)}
    return candidates.Candidate.model_validate({**cand.model_dump(), **update}) if update else cand


def _read_kernel(path: Path) -> str:
    """The file's text, refused before reading when it is larger than any candidate may be."""
    from harness_tools.task.spec import MAX_SOURCE_BYTES

    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise ValueError(f"{path} has {size} bytes; a kernel source may have at most {MAX_SOURCE_BYTES}")
    return path.read_text()


def _assignments(items: list[str], convert) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        out[name.strip()] = convert(value.strip())
    return out


def _say_if_unjailed() -> None:
    from harness_tools.run import jail

    state = jail.require_active()  # CUDAOPT_JAIL=require: an error (exit 2) instead of an unjailed run
    if not state.active:
        print(f"cudaopt: warning: the kernel runs unjailed ({state.detail}); `cudaopt doctor` says more", file=sys.stderr)


def _default_backend() -> str:
    if gpu_present():
        return "cuda"
    if "cpu" in available_backends():
        print("cudaopt: no GPU found; using the cpu backend (CPU timings)", file=sys.stderr)
        return "cpu"
    raise HarnessError("no NVIDIA GPU found on this machine and no CPU backend is installed")
