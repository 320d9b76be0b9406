// Bounded pages of the run store's lists: list_runs and history take `cursor` and answer `next_cursor` in
// their structured content, absent on the last page (as MCP's own nextCursor, 2025-11-25
// server/utilities/pagination). Followed to the end; no item may come twice, none may be missing.

import { textOf } from "../lib/session.mjs";

const MAX_PAGES = 500;
const PAGE = 2; // history's limit: a few events already need several pages
const MAX_RUNS = 60; // list_runs has no limit: runs are created until its first page is not the last
const RUNS_BATCH = 5;

const declares = (tool, key) => key in (tool?.outputSchema?.properties ?? {});

async function walk(session, tool, baseArgs, key) {
  const items = [];
  const cursors = new Set();
  let cursor;
  for (let pages = 1; pages <= MAX_PAGES; pages += 1) {
    const result = await session.call(tool.name, { ...baseArgs, ...(cursor ? { cursor } : {}) });
    const sc = result.structuredContent ?? {};
    if (result.isError) return { problem: `page ${pages} is an error: ${textOf(result).slice(0, 200)}` };
    items.push(...(sc[key] ?? []));
    if (!sc.next_cursor) return { items, pages };
    if (cursors.has(sc.next_cursor)) return { problem: `next_cursor ${JSON.stringify(sc.next_cursor)} came back twice` };
    cursors.add(sc.next_cursor);
    cursor = sc.next_cursor;
  }
  return { problem: `still paging after ${MAX_PAGES} pages` };
}

/** FAIL unless `tool` takes `cursor` and its outputSchema declares `next_cursor`: the feature is not there yet. */
function missingFeature(tool) {
  if (!tool) return "the tool is not listed";
  const takes = Object.keys(tool.inputSchema?.properties ?? {});
  if (!takes.includes("cursor")) return `not there yet: it takes no cursor argument (it takes ${takes.join(", ") || "nothing"})`;
  if (!declares(tool, "next_cursor")) return "not there yet: its outputSchema declares no next_cursor";
  return null;
}

async function checkPaged(report, session, { tool, key, args, identity, expected, needPages }) {
  const name = `${tool?.name} pages by cursor to the end, no item twice`;
  const missing = missingFeature(tool);
  if (missing) {
    report.fail(name, missing);
    return;
  }
  const walked = await walk(session, tool, args, key);
  if (walked.problem) {
    report.fail(name, walked.problem);
    return;
  }
  const ids = walked.items.map(identity);
  const repeated = ids.filter((id, i) => ids.indexOf(id) !== i);
  const absent = expected(walked.items, ids);
  const paged = walked.pages >= needPages;
  report.check(name, repeated.length === 0 && absent.length === 0 && paged,
    `${ids.length} item(s) in ${walked.pages} page(s)`
      + (paged ? "" : `; expected at least ${needPages} pages`)
      + (repeated.length ? `; repeated: ${repeated.slice(0, 5).join(", ")}` : "")
      + (absent.length ? `; missing: ${absent.join(", ")}` : ""));
}

/** Creates runs of `task` until list_runs' first page has a next_cursor (or MAX_RUNS exist); returns all ids. */
async function fillRunStore(session, task, runIds) {
  while (runIds.length < MAX_RUNS) {
    const first = await session.call("list_runs", {});
    if (first.structuredContent?.next_cursor) return true;
    for (let i = 0; i < RUNS_BATCH; i += 1) runIds.push((await session.call("create_run", { task })).structuredContent?.run_id);
  }
  return Boolean((await session.call("list_runs", {})).structuredContent?.next_cursor);
}

export async function checkToolPaging(report, session, tools, { task, runId, evaluations }) {
  const listRuns = tools.find((t) => t.name === "list_runs");
  const runIds = [runId];
  if (!missingFeature(listRuns)) {
    const paged = await fillRunStore(session, task, runIds);
    report.check("list_runs answers a bounded page", paged,
      paged ? `its first page is not the last once ${runIds.length} runs exist` : `one page held all ${runIds.length} runs`);
  }
  await checkPaged(report, session, {
    tool: listRuns, key: "runs", args: {}, identity: (r) => r.run_id, needPages: 2,
    expected: (_, ids) => runIds.filter((id) => !ids.includes(id)),
  });
  const history = tools.find((t) => t.name === "history");
  const limit = "limit" in (history?.inputSchema?.properties ?? {}) ? { limit: PAGE } : {};
  await checkPaged(report, session, {
    tool: history, key: "events", args: { run_id: runId, ...limit }, identity: (e) => JSON.stringify(e),
    needPages: limit.limit ? Math.ceil(evaluations / PAGE) : 1,
    expected: (events) => {
      const seen = events.filter((e) => e.event === "evaluate").length;
      return seen >= evaluations ? [] : [`evaluate events: ${seen} of the suite's ${evaluations}`];
    },
  });
}
