// tools/call: list_tasks, create_run, evaluations (baseline, wrong kernel), a misspelled argument, an unknown
// tool, and progress notifications that only go up.

import { wrongKernel } from "../lib/kernels.mjs";
import { describe } from "../lib/report.mjs";
import { textOf } from "../lib/session.mjs";

export const QUICK = { reps: 2, warmup: 1 }; // timing the cpu backend does is not what is under test

/** The task to run: `preferred` when the server bundles it, else the first one listed. */
export async function checkListTasks(report, session, preferred) {
  const result = await session.call("list_tasks");
  const names = (result.structuredContent?.tasks ?? []).map((t) => t.name);
  report.check("tools/call list_tasks", !result.isError && names.length > 0, names.join(", "));
  return names.includes(preferred) ? preferred : names[0];
}

export async function checkCreateRun(report, session, task) {
  const result = await session.call("create_run", { task });
  const run = result.structuredContent ?? {};
  const signature = run.task?.signature;
  report.check(`tools/call create_run ${task}`, !result.isError && Boolean(run.run_id) && Boolean(signature),
    `${run.run_id}; ${signature}`);
  return { runId: run.run_id, signature };
}

function progressProblems(values) {
  const bad = values.findIndex((v, i) => i > 0 && !(v > values[i - 1]));
  return bad < 0 ? null : `${values[bad - 1]} -> ${values[bad]}`;
}

/** The baseline evaluated; progress values must strictly increase (2025-11-25 basic/utilities/progress). */
export async function checkBaseline(report, session, runId) {
  const progress = [];
  const result = await session.call("evaluate", { run_id: runId, ...QUICK }, { onprogress: (p) => progress.push(p.progress) });
  const sc = result.structuredContent ?? {};
  report.check("tools/call evaluate (baseline) is correct", !result.isError && sc.correct === true,
    `${sc.candidate_id}, correct ${sc.correct}`);
  const wentDown = progressProblems(progress);
  report.check("progress notifications increase", wentDown === null,
    wentDown ? `went ${wentDown} in [${progress.join(", ")}]` : `${progress.length} notification(s): [${progress.join(", ")}]`);
  return sc.candidate_id;
}

/** The slowest of two re-evaluations of a stored candidate: the yardstick for the call after a cancel. */
export async function measureReevaluation(report, session, runId, candidateId) {
  const durations = [];
  for (let i = 0; i < 2; i += 1) {
    const start = performance.now();
    const result = await session.call("evaluate", { run_id: runId, candidate_id: candidateId, ...QUICK });
    durations.push(performance.now() - start);
    if (result.isError || !result.structuredContent?.correct) {
      report.fail("re-evaluate a stored candidate", textOf(result).slice(0, 300));
      return null;
    }
  }
  const normal = Math.max(...durations);
  report.pass("re-evaluate a stored candidate", `${durations.map((d) => (d / 1000).toFixed(2)).join(" s, ")} s`);
  return normal;
}

export async function checkWrongKernel(report, session, runId, signature) {
  const result = await session.call("evaluate", { run_id: runId, source: wrongKernel(signature), ...QUICK });
  const sc = result.structuredContent ?? {};
  report.check("tools/call evaluate (wrong kernel) is an isError result with correct false",
    result.isError === true && sc.correct === false, `isError ${result.isError}, correct ${sc.correct}`);
}

/** 2025-11-25 server/tools, error handling: input errors as tool execution errors the model can act on. */
export async function checkMisspelledArgument(report, session, runId) {
  const name = "tools/call evaluate {rep: 3} is an isError result naming 'rep' and the accepted names";
  try {
    const result = await session.call("evaluate", { run_id: runId, rep: 3 });
    const text = textOf(result);
    const ok = result.isError === true && /\brep\b/.test(text) && text.includes("reps") && text.includes("run_id");
    report.check(name, ok, `isError ${result.isError}: ${text.slice(0, 240)}`);
  } catch (error) {
    report.fail(name, `a JSON-RPC error, not a tool result: ${describe(error)}`);
  }
}

/** 2025-11-25 server/tools, error handling: an unknown tool is a protocol error. */
export async function checkUnknownTool(report, session) {
  const name = "tools/call of an unknown tool is a JSON-RPC error";
  try {
    const result = await session.call("no_such_tool", {});
    report.fail(name, `answered with a result (isError ${result.isError}): ${textOf(result).slice(0, 200)}`);
  } catch (error) {
    report.check(name, typeof error?.code === "number", describe(error));
  }
}

/** Every structuredContent any call returned, validated with ajv against its tool's outputSchema. */
export function checkStructuredContent(report, session, outputValidators) {
  const byTool = new Map();
  for (const { name, result } of session.calls) {
    const validate = outputValidators.get(name);
    if (!validate) continue;
    const entry = byTool.get(name) ?? { count: 0, problems: [] };
    entry.count += 1;
    if (result.structuredContent === undefined) {
      if (!result.isError) entry.problems.push("a non-error result without structuredContent");
    } else {
      const invalid = validate(result.structuredContent);
      if (invalid) entry.problems.push(invalid);
    }
    byTool.set(name, entry);
  }
  for (const [name, { count, problems }] of byTool) {
    report.check(`structuredContent of ${name} matches its outputSchema (ajv)`, problems.length === 0,
      problems.length ? `${problems.length} of ${count}: ${problems.slice(0, 3).join(" | ")}` : `${count} result(s)`);
  }
}
