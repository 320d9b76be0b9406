// resources/read of every listed resource, of every ResourceLink a tool returned and of the run templates;
// resources/subscribe when claimed; the not-found error of an unknown resource (server/resources).

import { describe } from "../lib/report.mjs";

async function readAll(session, entries) {
  // entries: {uri, mimeType, source}; returns {unreadable: [...], mismatched: [...], read: n}
  const unreadable = [];
  const mismatched = [];
  for (const entry of entries) {
    try {
      const got = await session.client.readResource({ uri: entry.uri });
      const first = got.contents?.[0];
      if (!first) unreadable.push(`${entry.uri}: no contents`);
      else if (entry.mimeType && first.mimeType !== entry.mimeType) {
        mismatched.push(`${entry.uri} (${entry.source} ${entry.mimeType}, read ${first.mimeType})`);
      }
    } catch (error) {
      unreadable.push(`${entry.uri}: ${describe(error)}`);
    }
  }
  return { unreadable, mismatched, read: entries.length };
}

function linksOf(calls) {
  const byUri = new Map();
  for (const { name, result } of calls) {
    for (const block of result.content ?? []) {
      if (block.type === "resource_link" && !byUri.has(block.uri)) byUri.set(block.uri, { ...block, source: `link from ${name}` });
    }
  }
  return [...byUri.values()];
}

function checkReads(report, what, { unreadable, mismatched, read }) {
  report.check(`resources/read of ${what}`, read > 0 && unreadable.length === 0,
    unreadable.length ? `${unreadable.length} of ${read} failed: ${unreadable.join("; ")}` : `${read} read`);
  report.check(`resources/read mimeType equals that of ${what}`, read > 0 && mismatched.length === 0,
    mismatched.length ? `${mismatched.length} of ${read} differ: ${mismatched.join("; ")}` : `${read} agree`);
}

export async function checkResourceReads(report, session, { resources, templates, runId }) {
  checkReads(report, "every listed resource", await readAll(session,
    resources.map((r) => ({ uri: r.uri, mimeType: r.mimeType, source: "listed" }))));
  checkReads(report, "every ResourceLink a tool returned", await readAll(session, linksOf(session.calls)));
  const runOnly = templates.filter((t) => /^[^{}]*\{run_id\}[^{}]*$/.test(t.uriTemplate));
  checkReads(report, "the templates with only {run_id}", await readAll(session,
    runOnly.map((t) => ({ uri: t.uriTemplate.replace("{run_id}", runId), mimeType: t.mimeType, source: "template" }))));
  // 2025-11-25 says -32002; 2026-07-28 (SEP-2164) moved "resource not found" to -32602 and drops -32002.
  const name = "resources/read of an unknown URI is resource-not-found (-32602, or 2025-11-25's -32002)";
  try {
    await session.client.readResource({ uri: "cudaopt://no/such/resource" });
    report.fail(name, "answered with contents");
  } catch (error) {
    report.check(name, error?.code === -32602 || error?.code === -32002, describe(error));
  }
}

/** Subscribes when the server claims resources.subscribe; returns what checkSubscription needs. */
export async function startSubscription(report, session, uri) {
  if (!session.client.getServerCapabilities()?.resources?.subscribe) return null;
  const subscribedAt = performance.now();
  const ok = await report.step("resources/subscribe (claimed)", async () => {
    await session.client.subscribeResource({ uri });
    return true;
  });
  return ok ? { uri, subscribedAt } : null;
}

/** After a change to the subscribed resource: notifications/resources/updated for it must arrive. */
export async function checkSubscription(report, session, subscription) {
  const claimed = session.client.getServerCapabilities()?.resources?.subscribe;
  if (!claimed) {
    report.pass("resources.subscribe", "not claimed (nothing to check)");
    return;
  }
  if (!subscription) {
    report.fail("resources.subscribe (claimed) delivers notifications/resources/updated", "subscribing failed");
    return;
  }
  const update = await session.wire.waitFor((m) => m.method === "notifications/resources/updated"
    && m.params?.uri === subscription.uri, 10_000);
  report.check("resources.subscribe (claimed) delivers notifications/resources/updated", update !== null,
    update ? `for ${subscription.uri}` : `nothing for ${subscription.uri} within 10 s of an evaluation that changed it`);
  await report.step("resources/unsubscribe", () => session.client.unsubscribeResource({ uri: subscription.uri }));
}
