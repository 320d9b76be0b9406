// prompts/get for every listed prompt with real arguments, and the -32602 errors of 2025-11-25 server/prompts.

import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { describe } from "../lib/report.mjs";

/** Arguments the suite knows how to fill from what it has created; others make the prompt unfillable. */
function argumentsFor(prompt, known) {
  const args = {};
  const unfillable = [];
  for (const arg of prompt.arguments ?? []) {
    if (known[arg.name] !== undefined) args[arg.name] = known[arg.name];
    else if (arg.required) unfillable.push(arg.name);
  }
  return { args, unfillable };
}

async function expectInvalidParams(report, name, request) {
  try {
    const got = await request();
    report.fail(name, `answered with ${got.messages?.length ?? 0} message(s), not an error`);
  } catch (error) {
    const ok = error?.code === ErrorCode.InvalidParams && typeof error.message === "string"
      && !/internal server error/i.test(error.message) && error.message.length > 10;
    report.check(name, ok, describe(error));
  }
}

export async function checkPrompts(report, session, prompts, known) {
  for (const prompt of prompts) {
    const { args, unfillable } = argumentsFor(prompt, known);
    if (unfillable.length) {
      report.fail(`prompts/get ${prompt.name}`, `the suite cannot fill required argument(s) ${unfillable.join(", ")}`);
      continue;
    }
    await report.step(`prompts/get ${prompt.name}`, async () => {
      const got = await session.client.getPrompt({ name: prompt.name, arguments: args });
      const texts = (got.messages ?? []).filter((m) => m.content?.type === "text");
      const mentions = Object.values(args).every((v) => texts.some((m) => m.content.text.includes(String(v))));
      report.check(`prompts/get ${prompt.name}`, texts.length > 0 && mentions,
        `${got.messages?.length ?? 0} message(s) for ${JSON.stringify(args)}${mentions ? "" : "; the arguments do not appear in the text"}`);
    });
  }
  const withRunId = prompts.find((p) => (p.arguments ?? []).some((a) => a.name === "run_id"));
  if (withRunId) {
    const { args } = argumentsFor(withRunId, known);
    await expectInvalidParams(report, `prompts/get ${withRunId.name} with a bad run id is -32602 with the reason`,
      () => session.client.getPrompt({ name: withRunId.name, arguments: { ...args, run_id: "run-999999" } }));
  } else {
    report.fail("prompts/get with a bad run id is -32602", "no listed prompt takes a run_id");
  }
  await expectInvalidParams(report, "prompts/get of an unknown prompt is -32602",
    () => session.client.getPrompt({ name: "no_such_prompt", arguments: {} }));
  const required = prompts.find((p) => (p.arguments ?? []).some((a) => a.required));
  if (required) {
    await expectInvalidParams(report, `prompts/get ${required.name} without its required arguments is -32602`,
      () => session.client.getPrompt({ name: required.name, arguments: {} }));
  }
}
