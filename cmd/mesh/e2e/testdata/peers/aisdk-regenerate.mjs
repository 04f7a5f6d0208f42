// aisdk-regenerate.mjs runs the npm `ai` package's own chat (AbstractChat,
// what useChat wraps, with its DefaultChatTransport) against the mesh's AI
// SDK dialect (POST /api/ai-sdk): it sends a message, then calls
// regenerate(), which posts trigger "regenerate-message" with the
// assistant message's id. It prints the chat's messages after each as one
// JSON object on stdout; cmd/mesh/e2e/actions_test.go asserts on them.
//
// Environment: MESH_URL (http://host:port).

import { newChat } from './aisdk-chat.mjs';

const { chat, out } = newChat();
const summary = () => chat.messages.map((m) => ({
  id: m.id, role: m.role, text: m.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), parts: m.parts.map((p) => p.type),
}));
await chat.sendMessage({ text: 'list all resources' });
out.sent = summary();
await chat.regenerate();
out.regenerated = summary();
out.status = chat.status;
console.log(JSON.stringify(out));
process.exit(0);
