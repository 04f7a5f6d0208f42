// aisdk-read.mjs reads the mesh's AI SDK dialect (POST /api/ai-sdk) with
// the npm `ai` package's own reader, the one useChat's default transport
// uses: parseJsonEventStream against uiMessageChunkSchema, then
// readUIMessageStream, which builds the assistant's UIMessage. It prints
// the messages it built as one JSON object on stdout;
// cmd/mesh/e2e/aisdk_test.go asserts on them.
//
// Environment: MESH_URL (http://host:port), TOKEN (a user and approver).
//
// Scenario, in one chat (useChat's body {id, messages, trigger}):
//   tool:     "list all resources": a text part and a dynamic-tool part
//             with its output;
//   approval: "add resource sdk-1 with value 2": the tool part waits with
//             state approval-requested;
//   answer:   the client answers as addToolApprovalResponse does (state
//             approval-responded, approval {id, approved: true}) and sends
//             the messages again; the stream continues the same assistant
//             message up to the tool's output.

import { randomUUID } from 'node:crypto';
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from 'ai';

const base = process.env.MESH_URL;
const token = process.env.TOKEN;
if (!base || !token) {
  console.error('MESH_URL and TOKEN are required');
  process.exit(2);
}

const chatId = randomUUID();
const messages = [];
const out = { chatId, turns: {}, errors: [] };

// turn posts the chat and reads the answer into an assistant message
// (continuing `message` when given).
async function turn(name, message) {
  const res = await fetch(`${base}/api/ai-sdk`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    body: JSON.stringify({ id: chatId, messages, trigger: 'submit-message', messageId: undefined }),
  });
  const rec = { status: res.status, header: res.headers.get('x-vercel-ai-ui-message-stream'), chunks: [] };
  if (!res.ok) {
    rec.body = await res.text();
    out.turns[name] = rec;
    return null;
  }
  const chunks = parseJsonEventStream({ stream: res.body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          out.errors.push(`${name}: chunk rejected by uiMessageChunkSchema: ${result.error?.message ?? result.error}`);
          return;
        }
        rec.chunks.push(result.value.type);
        controller.enqueue(result.value);
      },
    }),
  );
  let last;
  for await (const msg of readUIMessageStream({
    message,
    stream: chunks,
    terminateOnError: true,
    onError: (err) => out.errors.push(`${name}: ${err?.message ?? err}`),
  })) {
    last = msg;
  }
  rec.message = structuredClone(last);
  out.turns[name] = rec;
  console.error(`${name}: ${res.status} ${rec.chunks.join(' ')}`);
  return last;
}

messages.push({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: 'list all resources' }] });
const first = await turn('tool');
if (first) messages.push(first);

messages.push({ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: 'add resource sdk-1 with value 2' }] });
const paused = await turn('approval');
if (paused) {
  messages.push(paused);
  // What useChat's addToolApprovalResponse does to the waiting part.
  const answered = structuredClone(paused);
  for (const p of answered.parts) {
    if (p.state === 'approval-requested') {
      p.state = 'approval-responded';
      p.approval = { id: p.approval.id, approved: true };
    }
  }
  messages[messages.length - 1] = answered;
  await turn('answer', answered);
}

console.log(JSON.stringify(out));
