// initialize and ping (2025-11-25 basic/lifecycle, basic/utilities/ping), and every capability the server
// claims held to its behaviour: a claim nothing backs is a failure, not a detail.

import { LATEST_PROTOCOL_VERSION, ListTasksResultSchema, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";

export async function checkInitialize(report, session) {
  const info = session.client.getServerVersion() ?? {};
  report.check("initialize: serverInfo has name and version", Boolean(info.name && info.version),
    `${info.name} ${info.version}${info.title ? ` (“${info.title}”)` : ""}`);
  const answer = session.wire.received((m) => m.result?.protocolVersion !== undefined)[0];
  const version = answer?.result?.protocolVersion;
  report.check("initialize: protocolVersion is one the client speaks", SUPPORTED_PROTOCOL_VERSIONS.includes(version),
    `client offered ${LATEST_PROTOCOL_VERSION}, server chose ${version}`);
  const caps = session.client.getServerCapabilities() ?? {};
  report.check("initialize: capabilities tools, resources, prompts", Boolean(caps.tools && caps.resources && caps.prompts),
    JSON.stringify(caps));
  const claimed = ["tools", "prompts", "resources"].filter((k) => caps[k]?.listChanged === true);
  report.note(`listChanged claimed for: ${claimed.length ? claimed.join(", ") : "none"}; `
    + `resources.subscribe ${caps.resources?.subscribe === true ? "claimed" : "not claimed"}`);
  const pong = await session.client.ping();
  report.check("ping answers an empty result", pong && Object.keys(pong).filter((k) => k !== "_meta").length === 0,
    JSON.stringify(pong));
}

/** Capabilities beyond tools/prompts/resources listing, checked after the suite has exercised the server. */
export async function checkClaimedCapabilities(report, session, { runId, prompts }) {
  const caps = session.client.getServerCapabilities() ?? {};
  for (const kind of ["tools", "prompts", "resources"]) {
    const method = `notifications/${kind}/list_changed`;
    const sent = session.wire.received((m) => m.method === method).length;
    if (caps[kind]?.listChanged === true) {
      report.check(`${kind}.listChanged (claimed) is backed by notifications`, sent > 0,
        sent ? `${sent} ${method} received` : `no ${method} during the whole suite (runs and candidates were created)`);
    } else {
      report.pass(`${kind}.listChanged`, `not claimed${sent ? `, yet ${sent} ${method} arrived` : ""}`);
    }
  }
  const runPrompt = prompts.find((p) => (p.arguments ?? []).some((a) => a.name === "run_id"));
  if (caps.completions && !runPrompt) {
    report.fail("completions (claimed): completion/complete of a run id", "no prompt takes a run_id to complete");
  } else if (caps.completions) {
    await report.step("completions (claimed): completion/complete of a run id", async () => {
      const got = await session.client.complete({
        ref: { type: "ref/prompt", name: runPrompt.name }, argument: { name: "run_id", value: runId.slice(0, 4) },
      });
      const values = got.completion?.values ?? [];
      report.check("completions (claimed): completion/complete of a run id", values.includes(runId),
        `${runPrompt.name}.run_id "${runId.slice(0, 4)}" -> ${values.length} value(s): ${values.slice(0, 4).join(", ")}`
          + (values.length > 4 ? ", …" : ""));
    });
  } else {
    report.pass("completions", "not claimed");
  }
  if (caps.logging) {
    await report.step("logging (claimed): logging/setLevel", async () => {
      await session.client.setLoggingLevel("info");
      report.pass("logging (claimed): logging/setLevel", "accepted");
    });
  } else {
    report.pass("logging", "not claimed");
  }
  if (caps.tasks) {
    await report.step("tasks (claimed): tasks/list", async () => {
      const got = await session.client.request({ method: "tasks/list", params: {} }, ListTasksResultSchema);
      report.pass("tasks (claimed): tasks/list", `${got.tasks?.length ?? 0} task(s)`);
    });
  } else {
    report.pass("tasks", "not claimed");
  }
  const known = new Set(["tools", "prompts", "resources", "completions", "logging", "tasks", "experimental"]);
  for (const extra of Object.keys(caps).filter((k) => !known.has(k))) {
    report.fail(`capability ${extra}`, "claimed, and this suite has no check for it: add one");
  }
  if (caps.experimental) report.note(`experimental capabilities (not checked): ${JSON.stringify(caps.experimental)}`);
}

