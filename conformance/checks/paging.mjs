// Bounded pages of the run store's lists: list_runs and history take `cursor` and answer `next_cursor` in
// their structured content (2025-11-25 server/utilities/pagination: opaque cursors, followed to the end).

import { textOf } from "../lib/session.mjs";

const MAX_PAGES = 500;
const PAGE = 2; // a small page, so a few runs and events already need several

async function walk(session, tool, baseArgs, key, pageArgs) {
  const items = [];
  const cursors = new Set();
  let cursor;
  for (let pages = 1; pages <= MAX_PAGES; pages += 1) {
    const result = await session.call(tool, { ...baseArgs, ...pageArgs, ...(cursor ? { cursor } : {}) });
    const sc = result.structuredContent ?? {};
    if (result.isError) return { problem: `page ${pages} is an error: ${textOf(result).slice(0, 200)}` };
    if (!("next_cursor" in sc)) return { problem: `no next_cursor in the structured content (keys: ${Object.keys(sc).join(", ")})` };
    items.push(...(sc[key] ?? []));
    if (!sc.next_cursor) return { items, pages };
    if (cursors.has(sc.next_cursor)) return { problem: `next_cursor ${JSON.stringify(sc.next_cursor)} came back twice` };
    cursors.add(sc.next_cursor);
    cursor = sc.next_cursor;
  }
  return { problem: `still paging after ${MAX_PAGES} pages` };
}

async function checkPaged(report, session, tools, { tool, key, args, identity, expected }) {
  const name = `${tool} pages by cursor to the end, no item twice`;
  const props = tools.find((t) => t.name === tool)?.inputSchema?.properties ?? {};
  if (!("cursor" in props)) {
    report.fail(name, `not there yet: ${tool} takes no cursor argument (it takes ${Object.keys(props).join(", ") || "nothing"})`);
    return;
  }
  const pageArgs = "limit" in props ? { limit: PAGE } : {};
  const walked = await walk(session, tool, args, key, pageArgs);
  if (walked.problem) {
    report.fail(name, walked.problem);
    return;
  }
  const ids = walked.items.map(identity);
  const repeated = ids.filter((id, i) => ids.indexOf(id) !== i);
  const missing = expected(walked.items, ids);
  report.check(name, repeated.length === 0 && missing.length === 0,
    `${ids.length} item(s) in ${walked.pages} page(s)${pageArgs.limit ? ` of ${PAGE}` : ""}`
      + (repeated.length ? `; repeated: ${repeated.slice(0, 5).join(", ")}` : "")
      + (missing.length ? `; missing: ${missing.join(", ")}` : ""));
}

export async function checkToolPaging(report, session, tools, { runIds, runId, evaluations }) {
  await checkPaged(report, session, tools, {
    tool: "list_runs", key: "runs", args: {}, identity: (r) => r.run_id,
    expected: (_, ids) => runIds.filter((id) => !ids.includes(id)),
  });
  await checkPaged(report, session, tools, {
    tool: "history", key: "events", args: { run_id: runId }, identity: (e) => JSON.stringify(e),
    expected: (events) => {
      const seen = events.filter((e) => e.event === "evaluate").length;
      return seen >= evaluations ? [] : [`evaluate events: ${seen} of the suite's ${evaluations}`];
    },
  });
}
