// The MCP Inspector CLI (a second independent client, pinned in package.json) over the same transport:
// tools/list, tools/call list_tasks, resources/list and prompts/list, checking the JSON it prints.

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const INSPECTOR = fileURLToPath(new URL("../node_modules/.bin/mcp-inspector", import.meta.url));
const TIMEOUT_MS = 180_000;

function run(args) {
  return new Promise((resolve) => {
    execFile(INSPECTOR, args, { timeout: TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The inspector's arguments for `target`; a stdio command goes first, as `mcp-inspector --cli` expects. */
function targetArgs(target) {
  return target.url ? [target.url, "--transport", "http"] : target.command;
}

async function inspect(report, target, name, methodArgs) {
  const got = await run(["--cli", ...targetArgs(target), ...methodArgs]);
  if (got.code !== 0) {
    report.fail(name, `exit ${got.code}: ${got.stderr.trim().split("\n").slice(-3).join(" | ")}`);
    return null;
  }
  try {
    return JSON.parse(got.stdout);
  } catch {
    report.fail(name, `printed no JSON: ${got.stdout.slice(0, 200)}`);
    return null;
  }
}

const same = (a, b) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

/** `seen`: what the SDK client listed ({tools, prompts, resources}) and the output validators it compiled. */
export async function checkInspector(report, target, seen) {
  let name = "Inspector CLI tools/list lists the tools the SDK client saw";
  const tools = await inspect(report, target, name, ["--method", "tools/list"]);
  if (tools) {
    const names = (tools.tools ?? []).map((t) => t.name);
    report.check(name, same(names, seen.tools.map((t) => t.name)), `${names.length} tools`);
  }
  name = "Inspector CLI tools/call list_tasks: structuredContent valid against the outputSchema";
  const called = await inspect(report, target, name, ["--method", "tools/call", "--tool-name", "list_tasks"]);
  if (called) {
    const validate = seen.outputValidators.get("list_tasks");
    const invalid = validate ? validate(called.structuredContent) : "list_tasks has no outputSchema";
    report.check(name, !called.isError && (called.structuredContent?.tasks ?? []).length > 0 && invalid === null,
      invalid ?? `${called.structuredContent.tasks.length} task(s)`);
  }
  name = "Inspector CLI resources/list lists the resources the SDK client saw";
  const resources = await inspect(report, target, name, ["--method", "resources/list"]);
  if (resources) {
    const uris = (resources.resources ?? []).map((r) => r.uri);
    report.check(name, same(uris, seen.resources.map((r) => r.uri)), uris.join(", "));
  }
  name = "Inspector CLI prompts/list lists the prompts the SDK client saw";
  const prompts = await inspect(report, target, name, ["--method", "prompts/list"]);
  if (prompts) {
    const names = (prompts.prompts ?? []).map((p) => p.name);
    report.check(name, same(names, seen.prompts.map((p) => p.name)), names.join(", "));
  }
}
