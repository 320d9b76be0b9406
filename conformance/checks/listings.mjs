// tools/list, prompts/list, resources/list, resources/templates/list, each followed through nextCursor.

import { compileSchema } from "../lib/schemas.mjs";
import { describe } from "../lib/report.mjs";

const MAX_PAGES = 1000;
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/; // 2025-11-25 server/tools: tool names
const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

/** Every item of a cursor-paged list method; throws when a cursor repeats (the walk would never end). */
export async function listAll(fetchPage, key) {
  const items = [];
  const seen = new Set();
  let cursor;
  for (let pages = 1; pages <= MAX_PAGES; pages += 1) {
    const page = await fetchPage(cursor === undefined ? undefined : { cursor });
    items.push(...(page[key] ?? []));
    if (!page.nextCursor) return { items, pages };
    if (seen.has(page.nextCursor)) throw new Error(`nextCursor ${JSON.stringify(page.nextCursor)} came back twice`);
    seen.add(page.nextCursor);
    cursor = page.nextCursor;
  }
  throw new Error(`still paging after ${MAX_PAGES} pages`);
}

function uniqueBy(items, key) {
  const names = items.map((i) => i[key]);
  return names.filter((n, i) => names.indexOf(n) !== i);
}

function toolProblems(tool) {
  const problems = [];
  if (!TOOL_NAME.test(tool.name)) problems.push("name outside [A-Za-z0-9_.-]{1,128}");
  if (!tool.title && !tool.annotations?.title) problems.push("no title");
  if (!tool.description) problems.push("no description");
  const input = tool.inputSchema ?? {};
  if (input.type !== "object") problems.push(`inputSchema type ${JSON.stringify(input.type)}, not "object"`);
  if (input.additionalProperties !== false) problems.push("inputSchema without additionalProperties: false");
  const missing = HINTS.filter((h) => typeof tool.annotations?.[h] !== "boolean");
  if (!tool.annotations) problems.push("no annotations");
  else if (missing.length) problems.push(`annotations lack ${missing.join(", ")}`);
  if (tool.outputSchema && tool.outputSchema.type !== "object") problems.push("outputSchema type is not \"object\"");
  return problems;
}

/** Returns {tools, outputValidators: Map(name -> validate)}; one check line per tool. */
export async function checkTools(report, session) {
  const { items: tools, pages } = await listAll((p) => session.client.listTools(p), "tools");
  const dupes = uniqueBy(tools, "name");
  report.check("tools/list (paged to the end)", tools.length > 0 && dupes.length === 0,
    `${tools.length} tools in ${pages} page(s)${dupes.length ? `; repeated: ${dupes.join(", ")}` : ""}`);
  const outputValidators = new Map();
  for (const tool of tools) {
    const problems = toolProblems(tool);
    for (const [which, schema] of [["inputSchema", tool.inputSchema], ["outputSchema", tool.outputSchema]]) {
      if (!schema) continue;
      try {
        const validate = compileSchema(schema);
        if (which === "outputSchema") outputValidators.set(tool.name, validate);
      } catch (error) {
        problems.push(`${which} does not compile: ${describe(error)}`);
      }
    }
    report.check(`tool ${tool.name}: title, closed inputSchema, annotations, schemas compile`, problems.length === 0,
      problems.length ? problems.join("; ") : `“${tool.title ?? tool.annotations?.title}”${tool.outputSchema ? ", has outputSchema" : ""}`);
  }
  return { tools, outputValidators };
}

export async function checkPromptList(report, session) {
  const { items: prompts, pages } = await listAll((p) => session.client.listPrompts(p), "prompts");
  const dupes = uniqueBy(prompts, "name");
  const undescribed = prompts.flatMap((p) => (p.arguments ?? []).filter((a) => !a.description).map((a) => `${p.name}.${a.name}`));
  report.check("prompts/list (paged to the end)", dupes.length === 0 && undescribed.length === 0,
    `${prompts.length} prompt(s) in ${pages} page(s): ${prompts.map((p) => p.name).join(", ")}`
      + (dupes.length ? `; repeated: ${dupes.join(", ")}` : "")
      + (undescribed.length ? `; arguments without a description: ${undescribed.join(", ")}` : ""));
  return prompts;
}

export async function checkResourceLists(report, session) {
  const { items: resources, pages } = await listAll((p) => session.client.listResources(p), "resources");
  const badResources = resources.filter((r) => !r.uri || !r.name);
  report.check("resources/list (paged to the end)", badResources.length === 0 && uniqueBy(resources, "uri").length === 0,
    `${resources.length} resource(s) in ${pages} page(s): ${resources.map((r) => r.uri).join(", ")}`);
  const listed = await listAll((p) => session.client.listResourceTemplates(p), "resourceTemplates");
  const badTemplates = listed.items.filter((t) => !t.uriTemplate || !t.name);
  report.check("resources/templates/list (paged to the end)", badTemplates.length === 0,
    `${listed.items.length} template(s) in ${listed.pages} page(s)`);
  return { resources, templates: listed.items };
}
