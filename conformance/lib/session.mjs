// An MCP session through the official TypeScript SDK client, with a tap on the wire: every JSON-RPC message
// sent and received is kept with its time, so checks can see what the SDK hides (a late response to a
// cancelled request, notifications nobody registered a handler for, the negotiated protocol version).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

// Long enough for a cpu-backend evaluation on a busy 2-core CI machine; progress notifications reset it.
const CALL_TIMEOUT_MS = 300_000;

export class Wire {
  constructor(transport) {
    this.messages = []; // {at (ms, performance.now()), dir: "sent" | "received", message}
    this.waiters = new Set();
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      this.record("sent", message);
      return send(message, options);
    };
    // The SDK's Protocol chains a handler that is already set when it connects.
    transport.onmessage = (message) => this.record("received", message);
  }

  record(dir, message) {
    const entry = { at: performance.now(), dir, message };
    this.messages.push(entry);
    for (const waiter of this.waiters) waiter(entry);
  }

  received(predicate = () => true) {
    return this.messages.filter((e) => e.dir === "received" && predicate(e.message)).map((e) => e.message);
  }

  sent(predicate = () => true) {
    return this.messages.filter((e) => e.dir === "sent" && predicate(e.message)).map((e) => e.message);
  }

  /** The first received message (already here or arriving within `ms`) that satisfies `predicate`, or null. */
  waitFor(predicate, ms) {
    const found = this.messages.find((e) => e.dir === "received" && predicate(e.message));
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => {
      const waiter = (entry) => {
        if (entry.dir === "received" && predicate(entry.message)) done(entry);
      };
      const timer = setTimeout(() => done(null), ms);
      const done = (entry) => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve(entry);
      };
      this.waiters.add(waiter);
    });
  }
}

export class Session {
  constructor(client, transport, wire, stderrTail) {
    this.client = client;
    this.transport = transport;
    this.wire = wire;
    this.stderrTail = stderrTail;
    this.calls = []; // {name, args, result} for every tools/call that answered with a result
  }

  /**
   * tools/call through the SDK's generic request(), not callTool(): callTool() validates structuredContent
   * with the SDK's own validator and throws on a mismatch, and the suite validates independently.
   */
  async call(name, args = {}, { signal, onprogress, timeoutMs = CALL_TIMEOUT_MS } = {}) {
    const result = await this.client.request(
      { method: "tools/call", params: { name, arguments: args } },
      CallToolResultSchema,
      { signal, onprogress, timeout: timeoutMs, resetTimeoutOnProgress: true },
    );
    this.calls.push({ name, args, result });
    return result;
  }

  async close() {
    await this.client.close();
  }
}

/** `target`: {url} for streamable HTTP, or {command: [program, ...args]} for stdio (the server is launched). */
export async function openSession(target) {
  const transport = target.url
    ? new StreamableHTTPClientTransport(new URL(target.url))
    : new StdioClientTransport({ command: target.command[0], args: target.command.slice(1), stderr: "pipe" });
  const stderrTail = [];
  transport.stderr?.on("data", (chunk) => {
    stderrTail.push(...String(chunk).split("\n").filter(Boolean));
    stderrTail.splice(0, Math.max(0, stderrTail.length - 40));
  });
  const wire = new Wire(transport);
  const client = new Client({ name: "cudaopt-conformance", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
  return new Session(client, transport, wire, stderrTail);
}

/** Text of a result's text content blocks, joined. */
export function textOf(result) {
  return (result?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}
