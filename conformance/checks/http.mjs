// Streamable HTTP session rules (2025-11-25 basic/transports), with plain fetch: a session of its own, so the
// SDK client's standing GET stream does not get in the way.

import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const POST_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

async function post(url, headers, message) {
  return fetch(url, { method: "POST", headers: { ...POST_HEADERS, ...headers }, body: JSON.stringify(message) });
}

/** The status and content type of a GET, without waiting for an event stream to end. */
async function probeGet(url, headers) {
  const controller = new AbortController();
  try {
    const response = await fetch(url, { method: "GET", headers: { accept: "text/event-stream", ...headers }, signal: controller.signal });
    return { status: response.status, type: response.headers.get("content-type") ?? "" };
  } finally {
    controller.abort();
  }
}

const streamOr405 = (got) => got.status === 405 || (got.status === 200 && got.type.startsWith("text/event-stream"));

export async function checkHttpSession(report, url) {
  const init = await post(url, {}, {
    jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "conformance-fetch", version: "1.0.0" } },
  });
  const body = await init.text();
  const version = /"protocolVersion"\s*:\s*"([^"]+)"/.exec(body)?.[1] ?? LATEST_PROTOCOL_VERSION;
  const sessionId = init.headers.get("mcp-session-id");
  report.check("HTTP: initialize over a plain POST", init.status === 200, `HTTP ${init.status}, session ${sessionId ? "issued" : "none (stateless)"}`);
  const session = { "mcp-protocol-version": version, ...(sessionId ? { "mcp-session-id": sessionId } : {}) };
  const initialized = await post(url, session, { jsonrpc: "2.0", method: "notifications/initialized" });
  await initialized.text();
  report.check("HTTP: a notification POST is 202 Accepted", initialized.status === 202, `HTTP ${initialized.status}`);

  const get = await probeGet(url, session);
  report.check("HTTP: GET /mcp is an event stream or 405", streamOr405(get), `HTTP ${get.status} ${get.type}`);
  // The server keeps one standing GET stream per session (409 Conflict for a second) and notices the aborted one
  // above only when its connection closes: a resuming client retries briefly, as this one does.
  let resumed = await probeGet(url, { ...session, "last-event-id": "0" });
  for (let tries = 0; resumed.status === 409 && tries < 30; tries += 1) {
    await new Promise((done) => setTimeout(done, 100));
    resumed = await probeGet(url, { ...session, "last-event-id": "0" });
  }
  report.check("HTTP: GET /mcp with Last-Event-ID is an event stream or 405 (not a server error)", streamOr405(resumed),
    `HTTP ${resumed.status} ${resumed.type}`);
  if (!sessionId) return;
  const deleted = await fetch(url, { method: "DELETE", headers: session });
  await deleted.text();
  report.check("HTTP: DELETE of the session is accepted or 405", [200, 202, 204, 405].includes(deleted.status), `HTTP ${deleted.status}`);
  if (deleted.status === 405) return;
  const after = await post(url, session, { jsonrpc: "2.0", id: 2, method: "ping" });
  await after.text();
  report.check("HTTP: a request on a terminated session is 404", after.status === 404, `HTTP ${after.status}`);
}
