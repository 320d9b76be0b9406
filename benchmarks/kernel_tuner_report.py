"""The tables ``kernel_tuner_examples.py`` prints: seconds per configuration on both sides, per-stage medians, and
where cudaopt's wall time went."""

from __future__ import annotations

OURS_STAGES = ["compile_ms", "inputs_ms", "reference_ms", "load_ms", "transfer_ms", "validate_ms", "time_ms",
               "compare_ms", "total_ms"]
KT_STAGES = ["compile_time", "verification_time", "benchmark_time", "framework_time", "strategy_time"]


def fmt(x, spec=".2f") -> str:
    return "-" if x is None else format(x, spec)


def tables(rows: dict) -> str:
    lines = [("| example | configs | cudaopt s/config cold | warm | Kernel Tuner s/config cold | warm | ratio cold "
              "| ratio warm | cudaopt w/o baseline cold | warm | KT tune_kernel only cold | warm |"), "|---|" + "---:|" * 11]
    for ex, r in rows.items():
        o, k = {p: r.get(f"cudaopt_{p}", {}) for p in ("cold", "warm")}, {p: r.get(f"kt_{p}", {}) for p in ("cold", "warm")}
        ratio = {p: o[p]["s_per_config"] / k[p]["s_per_config"] if o[p].get("configs") and k[p].get("configs")
                 else None for p in o}
        lines.append(f"| {ex} | {o['cold'].get('configs', o['warm'].get('configs', '-'))} | {fmt(o['cold'].get('s_per_config'))} "
                     f"| {fmt(o['warm'].get('s_per_config'))} | {fmt(k['cold'].get('s_per_config'))} | "
                     f"{fmt(k['warm'].get('s_per_config'))} | {fmt(ratio['cold'], '.3f')} | {fmt(ratio['warm'], '.3f')} | "
                     f"{fmt(o['cold'].get('s_per_config_no_baseline'))} | {fmt(o['warm'].get('s_per_config_no_baseline'))} | "
                     f"{fmt(k['cold'].get('tune_s_per_config'))} | {fmt(k['warm'].get('tune_s_per_config'))} |")
    lines += ["", "per-stage medians per configuration, ms (cudaopt: evaluation overhead, compile from compile.json "
              "unless a cache hit; KT: result dicts)",
              ("| example | phase | ours compile | inputs | reference | load | transfer | validate | time | compare | total "
               "| client s | KT compile | verify | benchmark | framework | strategy |"), "|---|---|" + "---:|" * 15]
    for ex, r in rows.items():
        for p in ("cold", "warm"):
            o = r.get(f"cudaopt_{p}", {}).get("stages_median_ms") or {}
            k = r.get(f"kt_{p}", {}).get("stages_median_ms") or {}
            if o or k:
                lines.append(f"| {ex} | {p} | " + " | ".join(fmt(o.get(s), ".1f") for s in OURS_STAGES)
                             + f" | {fmt(o.get('client_s'))} | " + " | ".join(fmt(k.get(s), ".1f") for s in KT_STAGES) + " |")
    lines += ["", "cudaopt's wall time, s: start-up (imports, server, worker, CUDA context), the baseline's evaluate, the "
              "configurations' evaluates, between calls (proposing, waiting on compiles ahead), after the last",
              "| example | phase | wall | start-up | baseline | configurations | between | after |", "|---|---|" + "---:|" * 6]
    for ex, r in rows.items():
        for p in ("cold", "warm"):
            o = r.get(f"cudaopt_{p}", {})
            w = o.get("wall_split_s") or {}
            if w:
                lines.append(f"| {ex} | {p} | {fmt(o.get('wall_s'), '.1f')} | " + " | ".join(
                    fmt(w.get(k), ".1f") for k in ("startup", "baseline", "configs", "between", "after")) + " |")
    return "\n".join(lines)
