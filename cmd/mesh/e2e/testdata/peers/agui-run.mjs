// agui-run.mjs runs the official AG-UI client (@ag-ui/client HttpAgent)
// against a mesh's POST /agui and prints what happened as one JSON object on
// stdout. cmd/mesh/e2e/agui_client_test.go runs it and asserts on the result.
//
// The client verifies the event stream itself (first event RUN_STARTED,
// messages and tool calls opened before their content and closed before
// RUN_FINISHED, schemas): any protocol violation makes runAgent reject, and
// the rejection is reported under "error" with the client's own message.
//
// Environment: AGUI_URL (http://host:port/agui), THREAD_ID (the conversation).
//
// Scenario, on one agent (one thread):
//   tool:      "list all resources" runs resources_list and answers;
//   interrupt: "add resource ag-1 with value 3" ends with RUN_FINISHED
//              whose outcome is an interrupt (agent.pendingInterrupts);
//   resume:    a run with resume [{interruptId, status: "resolved",
//              payload: {approved: true}}] completes the paused turn;
//   cancel:    "remove resource ag-1" pauses again, and a resume with
//              status "cancelled" rejects the call: the turn completes
//              without running it.

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const url = process.env.AGUI_URL;
const threadId = process.env.THREAD_ID || randomUUID();
if (!url) {
  console.error('AGUI_URL is required');
  process.exit(2);
}

const agent = new HttpAgent({ url, threadId });

// run executes one runAgent call and reports its events, outcome, result,
// new messages and error, if any.
async function run(name, params) {
  const rec = { name, events: [], outcome: null, interrupts: null, runFailed: null };
  const subscriber = {
    onEvent({ event }) {
      rec.events.push(event.type);
    },
    onRunFinishedEvent(p) {
      rec.outcome = p.outcome;
      if (p.outcome === 'interrupt') rec.interrupts = p.interrupts;
    },
    onRunFailed({ error }) {
      rec.runFailed = String(error && error.message ? error.message : error);
    },
  };
  const t0 = Date.now();
  try {
    const res = await agent.runAgent({ tools: [], context: [], forwardedProps: {}, ...params }, subscriber);
    rec.result = res.result ?? null;
    rec.newMessages = res.newMessages;
  } catch (err) {
    rec.error = String(err && err.stack ? err.stack : err);
  }
  rec.ms = Date.now() - t0;
  rec.pendingInterrupts = agent.pendingInterrupts;
  rec.messages = structuredClone(agent.messages);
  console.error(`${name}: ${rec.error ? `error ${rec.error.split('\n')[0]}` : `outcome ${rec.outcome}`} in ${rec.ms} ms; events ${rec.events.join(' ')}`);
  return rec;
}

const out = { threadId, runs: [] };

agent.addMessage({ id: randomUUID(), role: 'user', content: 'list all resources' });
out.runs.push(await run('tool', {}));

agent.addMessage({ id: randomUUID(), role: 'user', content: 'add resource ag-1 with value 3' });
const paused = await run('interrupt', {});
out.runs.push(paused);

// answer resumes every open interrupt of the agent with the same entry.
const answer = (entry) => (agent.pendingInterrupts || []).map((i) => ({ interruptId: i.id, ...entry }));

if (paused.outcome === 'interrupt') {
  out.runs.push(await run('resume', { resume: answer({ status: 'resolved', payload: { approved: true } }) }));

  agent.addMessage({ id: randomUUID(), role: 'user', content: 'remove resource ag-1' });
  const again = await run('interrupt-remove', {});
  out.runs.push(again);
  if (again.outcome === 'interrupt') out.runs.push(await run('cancel', { resume: answer({ status: 'cancelled' }) }));
}

process.stdout.write(`${JSON.stringify(out)}\n`);
