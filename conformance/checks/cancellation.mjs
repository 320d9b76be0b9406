// Cancellation (2025-11-25 basic/utilities/cancellation): after notifications/cancelled the receiver SHOULD
// stop processing, free its resources and send no response. Measured here as what a host feels: the time
// from the cancel to the answer of the next, cheap call, against that call's normal duration.

import { spinningKernel } from "../lib/kernels.mjs";
import { textOf } from "../lib/session.mjs";
import { QUICK } from "./tool_calls.mjs";

const CANCEL_AFTER_MS = 2_000;
const SPIN_TIMEOUT_S = 60; // what a cancel that does not stop the work would wait for
const SLACK_MS = 1_000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

/** Returns {requestId, abortedAt} for checkNoLateResponse, or null when the spinning call never went out. */
export async function checkCancellation(report, session, { runId, signature, candidateId, normalMs }) {
  const source = spinningKernel(signature);
  const controller = new AbortController();
  const spinning = session.call("evaluate", { run_id: runId, source, timeout_s: SPIN_TIMEOUT_S, ...QUICK },
    { signal: controller.signal }).then((result) => ({ result }), (error) => ({ error }));
  await sleep(CANCEL_AFTER_MS);
  const request = session.wire.sent((m) => m.method === "tools/call" && m.params?.arguments?.source === source).at(-1);
  const abortedAt = performance.now();
  controller.abort("conformance suite: cancelled after 2 s");
  const early = await spinning;
  if (early.result) {
    report.fail("evaluate of a spinning kernel is still running after 2 s", `it answered: ${textOf(early.result).slice(0, 200)}`);
    return null;
  }
  const requestId = request?.id;
  const notified = session.wire.sent((m) => m.method === "notifications/cancelled" && m.params?.requestId === requestId);
  report.check("the SDK sent notifications/cancelled for the aborted tools/call", requestId !== undefined && notified.length === 1,
    `request id ${requestId}`);

  let firstProgressAt = null;
  const next = await session.call("evaluate", { run_id: runId, candidate_id: candidateId, ...QUICK },
    { onprogress: () => { firstProgressAt ??= performance.now(); } });
  const answeredAt = performance.now();
  const limit = normalMs + SLACK_MS;
  const waited = answeredAt - abortedAt;
  report.check("the evaluate after a cancel is correct", !next.isError && next.structuredContent?.correct === true,
    textOf(next).slice(0, 160));
  report.check("cancel stops the work: the next evaluate finishes within its normal duration + 1 s", waited <= limit,
    `cancel -> next call answered in ${seconds(waited)} (normal ${seconds(normalMs)}, limit ${seconds(limit)})`
      + (firstProgressAt ? `; its first progress ${seconds(firstProgressAt - abortedAt)} after the cancel` : ""));
  return { requestId, abortedAt };
}

/** Run last, so a late answer to the cancelled request has had the whole rest of the suite to show up.
 *
 * Over streamable HTTP at the 2025 revisions a POST's SSE stream ends with the response to its request
 * (2025-11-25, transports), while cancellation says a receiver SHOULD NOT answer a cancelled request; the
 * Python SDK reconciles the two by ending the stream with one -32800 "Request cancelled" error at once. That
 * terminator is accepted over HTTP only if it comes within a second of the cancel (it stands for the work
 * being stopped); a result, any other error, or a late -32800 fails, and over stdio any answer fails. */
export function checkNoLateResponse(report, session, cancelled, { http = false } = {}) {
  if (!cancelled) {
    report.fail("no response to a cancelled request", "the cancellation check did not get as far as a cancel");
    return;
  }
  const answers = session.wire.messages.filter((e) => e.dir === "received" && e.message.id === cancelled.requestId
    && ("result" in e.message || "error" in e.message));
  const watched = performance.now() - cancelled.abortedAt;
  const terminator = (e) => http && e.message.error?.code === -32800 && e.at - cancelled.abortedAt < 1000;
  const late = answers.filter((e) => !terminator(e));
  const ended = answers.length > late.length ? `; the HTTP stream was ended by -32800 ${seconds(answers[0].at - cancelled.abortedAt)} after the cancel` : "";
  report.check("no response to a cancelled request", late.length === 0, late.length
    ? `${"error" in late[0].message ? `error ${JSON.stringify(late[0].message.error).slice(0, 120)}` : "a result"}`
      + ` arrived ${seconds(late[0].at - cancelled.abortedAt)} after the cancel`
    : `none in the ${seconds(watched)} since the cancel${ended}`);
}
