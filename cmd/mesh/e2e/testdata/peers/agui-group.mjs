// agui-group.mjs runs the official AG-UI client (@ag-ui/client HttpAgent)
// against a group chat of a mesh's POST /agui, and prints what happened as
// one JSON object on stdout. cmd/mesh/e2e/e2e_group_test.go asserts on it.
//
// Environment: AGUI_URL (http://host:port/agui), THREAD_ID (a new thread),
// GROUP (the group named in forwardedProps), MESSAGE (the user's message).
//
// The client verifies the stream itself; a violation rejects runAgent and
// is reported under "error".

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const { AGUI_URL: url, THREAD_ID: threadId, GROUP: group, MESSAGE: message } = process.env;
if (!url || !threadId || !group || !message) {
  console.error('AGUI_URL, THREAD_ID, GROUP and MESSAGE are required');
  process.exit(2);
}

const agent = new HttpAgent({ url, threadId });
agent.addMessage({ id: randomUUID(), role: 'user', content: message });

const out = { events: [], starts: [], customs: [], outcome: null, error: null, messages: [] };
const subscriber = {
  onEvent({ event }) {
    out.events.push(event.type);
    if (event.type === 'TEXT_MESSAGE_START') out.starts.push({ messageId: event.messageId, name: event.name ?? null });
    if (event.type === 'CUSTOM') out.customs.push({ name: event.name, value: event.value });
  },
  onRunFinishedEvent(p) {
    out.outcome = p.outcome ?? 'success';
  },
};
try {
  await agent.runAgent({ tools: [], context: [], forwardedProps: { group } }, subscriber);
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
out.messages = agent.messages.map((m) => ({ id: m.id, role: m.role, content: typeof m.content === 'string' ? m.content : null, name: m.name ?? null }));
console.error(`group run: ${out.error ? `error ${out.error.split('\n')[0]}` : `outcome ${out.outcome}`}; events ${out.events.join(' ')}`);
process.stdout.write(`${JSON.stringify(out)}\n`);
