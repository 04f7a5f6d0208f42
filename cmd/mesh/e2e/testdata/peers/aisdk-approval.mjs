// aisdk-approval.mjs runs the npm `ai` package's own chat (AbstractChat,
// what useChat wraps, with its DefaultChatTransport) through an approval
// against the mesh's AI SDK dialect (POST /api/ai-sdk), as a useChat page
// with sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses
// does: a message that asks for a destructive call, addToolApprovalResponse
// (approved), the continuation the chat sends by itself, then regenerate().
// It prints the chat's messages after each step as one JSON object on
// stdout; cmd/mesh/e2e/aisdk_test.go asserts on them.
//
// Environment: MESH_URL (http://host:port).

import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { newChat } from './aisdk-chat.mjs';

const { chat, out } = newChat({ sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
const summary = () => chat.messages.map((m) => ({
  id: m.id,
  role: m.role,
  text: m.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''),
  parts: m.parts.map((p) => (p.toolCallId ? { type: p.type, toolCallId: p.toolCallId, state: p.state } : { type: p.type })),
}));

// until waits for the chat to settle after a request it sent by itself.
async function until(cond, what) {
  const deadline = Date.now() + 30000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

try {
  await chat.sendMessage({ text: 'add resource sdk-web-1 with value 7' });
  out.asked = summary();
  const part = chat.lastMessage.parts.find((p) => p.state === 'approval-requested');
  if (!part) throw new Error('no tool part waits for an approval');
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until(() => chat.status === 'ready' && chat.lastMessage.parts.some((p) => p.state === 'output-available'), 'the continuation');
  out.continued = summary();
  await chat.regenerate();
  out.regenerated = summary();
  out.status = chat.status;
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
console.log(JSON.stringify(out));
process.exit(out.error ? 1 : 0);
