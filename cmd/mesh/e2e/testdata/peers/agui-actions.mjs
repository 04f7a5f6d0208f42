// agui-actions.mjs drives the user actions regenerate and feedback over
// AG-UI with the official client (@ag-ui/client HttpAgent, POST /agui) and
// over the WebSocket (GET /agui/ws, the npm `ws` client), and prints what
// happened as one JSON object on stdout; cmd/mesh/e2e/actions_test.go runs
// it and asserts on the result. The client verifies every SSE run itself;
// the socket's runs go through its verifyEvents.
//
// Environment: MESH_URL (http://host:port), THREAD_ID.
//
// Scenario, one thread:
//   first:        "list all resources" answered;
//   regenerate:   forwardedProps {action: "regenerate"}: a new answer;
//   feedback:     forwardedProps {action: "feedback", messageId: the new
//                 answer's, rating: "like", comment}: RUN_STARTED, CUSTOM
//                 feedback, RUN_FINISHED;
//   badFeedback:  rating "meh": the client's run fails (HTTP 400);
//   ws:           on a socket, a RunAgentInput with forwardedProps
//                 {action: "regenerate"}, then a {type: "feedback"} frame
//                 (dislike), then one naming a message that does not exist.

import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { from, lastValueFrom, toArray } from 'rxjs';
import { HttpAgent, verifyEvents } from '@ag-ui/client';

const base = process.env.MESH_URL;
const threadId = process.env.THREAD_ID || randomUUID();
if (!base) {
  console.error('MESH_URL is required');
  process.exit(2);
}

const agent = new HttpAgent({ url: `${base}/agui`, threadId });

async function run(name, params) {
  const rec = { name, events: [], customs: [], outcome: null };
  const subscriber = {
    onEvent({ event }) {
      rec.events.push(event.type);
      if (event.type === 'CUSTOM') rec.customs.push({ name: event.name, value: event.value });
    },
    onRunFinishedEvent(p) {
      rec.outcome = p.outcome;
    },
    onRunFailed({ error }) {
      rec.runFailed = String(error && error.message ? error.message : error);
    },
  };
  try {
    const res = await agent.runAgent({ tools: [], context: [], forwardedProps: {}, ...params }, subscriber);
    rec.newMessages = res.newMessages;
  } catch (err) {
    rec.error = String(err && err.stack ? err.stack : err);
  }
  console.error(`${name}: ${rec.error ? `error ${rec.error.split('\n')[0]}` : `outcome ${rec.outcome}`}; events ${rec.events.join(' ')}`);
  return rec;
}

// answerOf is the id of the last assistant message with text.
const answerOf = (msgs) => [...(msgs || [])].reverse().find((m) => m.role === 'assistant' && m.content)?.id;

const out = { threadId, runs: [] };
agent.addMessage({ id: randomUUID(), role: 'user', content: 'list all resources' });
const first = await run('first', {});
out.runs.push(first);
const regen = await run('regenerate', { forwardedProps: { action: 'regenerate' } });
out.runs.push(regen);
out.answer = answerOf(regen.newMessages);
out.runs.push(await run('feedback', { forwardedProps: { action: 'feedback', messageId: out.answer, rating: 'like', comment: 'ag-ui says yes' } }));
out.runs.push(await run('badFeedback', { forwardedProps: { action: 'feedback', messageId: out.answer, rating: 'meh' } }));

// The socket: frames queue up until read.
const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/agui/ws`);
const queue = [];
const waiters = [];
ws.on('message', (data) => {
  const frame = JSON.parse(data.toString());
  const w = waiters.shift();
  if (w) w(frame);
  else queue.push(frame);
});
await new Promise((resolve, reject) => {
  ws.on('open', resolve);
  ws.on('error', reject);
});
const next = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiters.push(resolve)));

const wsOut = { frames: [], events: [] };
// The socket's first frame names the connection.
wsOut.opened = (await next()).type;
const runId = randomUUID();
ws.send(JSON.stringify({ threadId, runId, messages: [], tools: [], context: [], forwardedProps: { action: 'regenerate' } }));
for (;;) {
  const f = await next();
  if (f.type === 'connection_open') continue; // the socket's greeting, before any run
  wsOut.frames.push(f.type);
  if (f.type === 'error') {
    wsOut.runError = f;
    break;
  }
  wsOut.events.push(...f.events);
  if (f.events.some((e) => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')) break;
}
try {
  await lastValueFrom(verifyEvents(false)(from(wsOut.events)).pipe(toArray()));
} catch (err) {
  wsOut.verifyError = String(err && err.message ? err.message : err);
}
wsOut.answer = [...wsOut.events].reverse().find((e) => e.type === 'TEXT_MESSAGE_START')?.messageId;
ws.send(JSON.stringify({ type: 'feedback', threadId, messageId: wsOut.answer, rating: 'dislike' }));
wsOut.feedback = await next();
ws.send(JSON.stringify({ type: 'feedback', threadId, messageId: 'no-such-message', rating: 'like' }));
wsOut.unknown = await next();
ws.close();
out.ws = wsOut;

console.log(JSON.stringify(out));
process.exit(0);
