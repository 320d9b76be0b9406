#!/usr/bin/env node
// The cudaopt MCP server checked by independent clients: the official TypeScript SDK client and the MCP
// Inspector CLI. One line per check; exit status 1 when any check fails, 2 when the server cannot be reached.
//
//   node conformance/suite.mjs [--task NAME] [--no-inspector] --url http://127.0.0.1:8765/mcp
//   node conformance/suite.mjs [--task NAME] [--no-inspector] -- cudaopt-mcp --backend cpu --results DIR
//
// The stdio form launches the command after `--` as the server. docs/mcp_conformance.md maps each check to
// the requirement of the MCP specification it covers.

import { Report, describe } from "./lib/report.mjs";
import { openSession } from "./lib/session.mjs";
import { checkCancellation, checkNoLateResponse } from "./checks/cancellation.mjs";
import { checkClaimedCapabilities, checkInitialize } from "./checks/capabilities.mjs";
import { checkHttpSession } from "./checks/http.mjs";
import { checkInspector } from "./checks/inspector.mjs";
import { checkPromptList, checkResourceLists, checkTools, listAll } from "./checks/listings.mjs";
import { checkToolPaging } from "./checks/paging.mjs";
import { checkPrompts } from "./checks/prompts.mjs";
import { checkResourceReads, checkSubscription, startSubscription } from "./checks/resources.mjs";
import {
  checkBaseline, checkCreateRun, checkListTasks, checkMisspelledArgument, checkStructuredContent, checkUnknownTool,
  checkWrongKernel, measureReevaluation,
} from "./checks/tool_calls.mjs";

const USAGE = "usage: suite.mjs [--task NAME] [--no-inspector] (--url URL | -- SERVER_COMMAND...)";

function parseArgs(argv) {
  const options = { task: "transpose", inspector: true, target: null };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "--") {
      if (argv.length > i + 1) options.target = { command: argv.slice(i + 1) };
      break;
    } else if (arg === "--url") options.target = { url: argv[++i] };
    else if (arg === "--task") options.task = argv[++i];
    else if (arg === "--no-inspector") options.inspector = false;
    else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  if (!options.target) throw new Error(USAGE);
  return options;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const report = new Report();
  const where = options.target.url ?? `stdio: ${options.target.command.join(" ")}`;
  process.stdout.write(`cudaopt MCP conformance over ${where}\n`);
  let session;
  try {
    session = await openSession(options.target);
  } catch (error) {
    process.stdout.write(`cannot connect: ${describe(error)}\n`);
    return 2;
  }
  const step = (name, fn) => report.step(name, fn);

  await step("initialize", () => checkInitialize(report, session));
  const listed = (await step("tools/list", () => checkTools(report, session))) ?? { tools: [], outputValidators: new Map() };
  const prompts = (await step("prompts/list", () => checkPromptList(report, session))) ?? [];
  const lists = (await step("resources/list", () => checkResourceLists(report, session))) ?? { resources: [], templates: [] };
  const task = await step("tools/call list_tasks", () => checkListTasks(report, session, options.task));
  const run = (await step(`tools/call create_run ${task}`, () => checkCreateRun(report, session, task))) ?? {};
  if (run.runId && run.signature) {
    const { runId, signature } = run;
    const subscription = await step("resources/subscribe", () => startSubscription(report, session, `cudaopt://runs/${runId}`));
    const candidateId = await step("tools/call evaluate (baseline)", () => checkBaseline(report, session, runId));
    await step("resources.subscribe", () => checkSubscription(report, session, subscription));
    const normalMs = await step("re-evaluate", () => measureReevaluation(report, session, runId, candidateId));
    await step("wrong kernel", () => checkWrongKernel(report, session, runId, signature));
    await step("misspelled argument", () => checkMisspelledArgument(report, session, runId));
    await step("unknown tool", () => checkUnknownTool(report, session));
    await step("prompts/get", () => checkPrompts(report, session, prompts, { run_id: runId, candidate_id: candidateId, task }));
    const cancelled = normalMs
      ? await step("cancellation", () => checkCancellation(report, session, { runId, signature, candidateId, normalMs }))
      : null;
    const evaluations = session.calls.filter((c) => c.name === "evaluate" && c.args.run_id === runId
      && c.result.structuredContent?.candidate_id).length;
    await step("list_runs / history paging", () => checkToolPaging(report, session, listed.tools, { task, runId, evaluations }));
    await step("resources/read", () => checkResourceReads(report, session, { ...lists, runId }));
    checkStructuredContent(report, session, listed.outputValidators);
    await step("claimed capabilities", () => checkClaimedCapabilities(report, session, { runId, prompts }));
    if (options.target.url) await step("HTTP session", () => checkHttpSession(report, options.target.url));
    checkNoLateResponse(report, session, cancelled, { http: Boolean(options.target.url) });
  } else {
    report.fail("tool calls, prompts/get, cancellation, paging, resource reads", "skipped: no run could be created");
  }
  const resources = (await step("resources/list (again)", () => listAll((p) => session.client.listResources(p), "resources")))?.items ?? [];
  await session.close();
  if (options.inspector) {
    await step("Inspector CLI", () => checkInspector(report, options.target, { ...listed, prompts, resources }));
  }
  if (report.failed.length && session.stderrTail.length) {
    process.stdout.write(`\nlast lines of the server's stderr:\n${session.stderrTail.map((l) => `  ${l}`).join("\n")}\n`);
  }
  return report.summary() ? 1 : 0;
}

main().then((code) => process.exit(code), (error) => {
  process.stderr.write(`${error instanceof Error ? error.message : error}\n`);
  process.exit(2);
});
