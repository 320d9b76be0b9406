"""What each ``cudaopt`` command's ``--help`` says beyond its options: a description, examples and exit codes."""

from __future__ import annotations

import argparse

EXIT_USAGE = "2: bad input (an unknown task, a bad option, a task.json error with its field named)"

TEXTS: dict[str, tuple[str, list[str], list[str]]] = {  # command: (description, examples, exit codes)
    "tasks": ("List the bundled tasks: name, kernel, cases, whether they have tunables.",
              ["cudaopt tasks", "cudaopt tasks --json"], ["0: listed"]),
    "eval": ("Compile one candidate of a task (its baseline, its tunable kernel at given values, or your own kernel "
             "file), check every case against the float64 reference and time the performance cases. A task is a "
             "bundled name or a folder (docs/tasks.md).",
             ["cudaopt eval sgemm", "cudaopt eval examples/convolution --backend cpu",
              "cudaopt eval sgemm --tuned BM=64,BN=64,BK=8,TM=4,TN=4,MINB=1,WIDE_MIN=-1",
              "cudaopt eval mytask --kernel mine.cu --launch '{\"grid\":[\"ceil_div(n,256)\"],\"block\":[256]}'"],
             ["0: correct on every case", "1: not correct (the table says which case and why)", EXIT_USAGE]),
    "serve": ("Run the MCP server: stdio for a local agent (the default), or streamable HTTP (--transport http) for remote "
              "clients, which then need a token and see only bundled tasks and --task-root folders.",
              ["cudaopt serve", "cudaopt serve --results ./results --backend cpu",
               "CUDAOPT_MCP_TOKEN=... cudaopt serve --transport http --host 0.0.0.0 --port 8765 --task-root ~/tasks"],
              ["0: stopped", EXIT_USAGE]),
    "profile": ("Profile one performance case of a stored candidate with Nsight Compute (cuda backend): the "
                "summary an optimiser reads (bound, occupancy, memory throughput, stalls).",
                ["cudaopt profile run-001 c0003", "cudaopt profile run-001 c0003 --case perf_4096 --json"],
                ["0: profiled", "1: no profile (no GPU, ncu missing or counters not permitted: the reason is printed)",
                 EXIT_USAGE]),
    "sanitize": ("Check a stored candidate for memory errors and data races: compute-sanitizer (memcheck, racecheck, "
                 "initcheck, synccheck) on the cuda backend, guarded buffers and a ThreadSanitizer race check on cpu. "
                 "A missing __syncthreads shows up here with the two lines that race.",
                 ["cudaopt sanitize run-001 c0004", "cudaopt sanitize run-001 c0004 --case val_odd --case val_1"],
                 ["0: clean", "1: problems found, or the check could not run (printed)", EXIT_USAGE]),
    "doctor": ("Is candidate code jailed here? Runs a probe inside the jail and says whether it could read a host "
               "file, reach the host's loopback, see a token or other processes, or write outside its scratch.",
               ["cudaopt doctor", "cudaopt doctor --json"], ["0: the jail holds", "1: it does not (what leaked is printed)"]),
    "optimize": ("The autonomous loop: the baseline, then proposals (an LLM rewriting the kernel, or the tuner over "
                 "the task's tunables) evaluated through the MCP server; the best is confirmed on fresh inputs.",
                 ["cudaopt optimize sgemm", "cudaopt optimize examples/matmul --proposer tuner --max-iterations 40",
                  "OPENAI_API_KEY=... cudaopt optimize mytask --proposer llm --model gpt-5",
                  "cudaopt optimize --run run-003 --max-iterations 10   (continue a run)"],
                 ["0: a correct candidate was found (and confirmed)", "1: none was", EXIT_USAGE]),
    "report": ("Build a run's report: one self-contained HTML page (score per iteration, latency distributions, "
               "tunable-space heatmaps, where wrong outputs are wrong, roofline against the GPU's measured peaks, "
               "compile resources, the environment), each plot also as SVG and PNG, and a markdown summary, in the "
               "run folder's report/. cudaopt optimize writes it at the end of every run.",
               ["cudaopt report run-003", "cudaopt report results/run-003 --out sgemm.html",
                "cudaopt report run-003 --markdown   (print the summary)"],
               ["0: written", "2: no such run, or the report cannot be written"]),
    "new": ("Start a task folder from a kernel file: task.json with the kernel's typed parameters read from its source "
            "(pointers become buffers, const ones inputs; integer scalars become sizes), starter validation sizes, a "
            "performance case, a reference.py stub and a copy of the kernel. Then fill in what it prints and run "
            "cudaopt eval DIR, which names what is still missing.",
            ["cudaopt new mytask --kernel saxpy.cu", "cudaopt new mytask --kernel kernels.cu --kernel-name scale"],
            ["0: written (and it loads)", "2: the kernel cannot be read, or DIR already holds a task"]),
    "schema": ("Print the JSON Schema of task.json, generated from the models that load it. Editors validate a "
               "task.json that names it: \"$schema\": \"path/to/task.schema.json\" (relative to the file). Rules "
               "across fields are checked when the task loads.",
               ["cudaopt schema task", "cudaopt schema task --out mytask/task.schema.json"],
               ["0: printed or written", "2: the file cannot be written"]),
}


def command(sub: argparse._SubParsersAction, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose --help has its description, examples and exit codes."""
    description, examples, codes = TEXTS[name]
    epilog = "examples:\n" + "".join(f"  {e}\n" for e in examples) + "exit codes:\n" + "".join(f"  {c}\n" for c in codes)
    return sub.add_parser(name, help=summary, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
