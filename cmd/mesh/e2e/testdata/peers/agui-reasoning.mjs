// agui-reasoning.mjs runs the official AG-UI client (@ag-ui/client
// HttpAgent) against a mesh's POST /agui whose model reasons before it
// answers, and prints one JSON object on stdout: the events the client
// accepted, the reasoning it assembled (its messages of role "reasoning"),
// and its error if it rejected the stream. The client verifies the stream
// itself: a reasoning message opened before its content and closed before
// RUN_FINISHED, every event's schema.
//
// Environment: AGUI_URL (http://host:port/agui), THREAD_ID.

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const url = process.env.AGUI_URL;
if (!url) {
  console.error('AGUI_URL is required');
  process.exit(2);
}
const agent = new HttpAgent({ url, threadId: process.env.THREAD_ID || randomUUID() });
const out = { events: [], reasoningDeltas: [], error: null, runFailed: null };
agent.addMessage({ id: randomUUID(), role: 'user', content: 'list all resources' });
try {
  await agent.runAgent({ tools: [], context: [], forwardedProps: {} }, {
    onEvent({ event }) { out.events.push(event.type); },
    onReasoningMessageContentEvent({ event }) { out.reasoningDeltas.push(event.delta); },
    onRunFailed({ error }) { out.runFailed = String(error && error.message ? error.message : error); },
  });
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
out.messages = structuredClone(agent.messages);
console.log(JSON.stringify(out));
