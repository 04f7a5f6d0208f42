// aisdk-regenerate.mjs runs the npm `ai` package's own chat (AbstractChat,
// what useChat wraps, with its DefaultChatTransport) against the mesh's AI
// SDK dialect (POST /api/ai-sdk): it sends a message, then calls
// regenerate(), which posts trigger "regenerate-message" with the
// assistant message's id. It prints the chat's messages after each as one
// JSON object on stdout; cmd/mesh/e2e/actions_test.go asserts on them.
//
// Environment: MESH_URL (http://host:port).

import { randomUUID } from 'node:crypto';
import { AbstractChat, DefaultChatTransport } from 'ai';

const base = process.env.MESH_URL;
if (!base) {
  console.error('MESH_URL is required');
  process.exit(2);
}

// State keeps the chat's messages as plain arrays (useChat keeps them in
// React state).
class State {
  constructor() {
    this.status = 'ready';
    this.error = undefined;
    this.messages = [];
  }

  pushMessage(m) { this.messages = this.messages.concat(m); }

  popMessage() { this.messages = this.messages.slice(0, -1); }

  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)]; }

  snapshot(v) { return structuredClone(v); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

const out = { chatId: randomUUID(), errors: [] };
const chat = new Chat({
  id: out.chatId,
  transport: new DefaultChatTransport({ api: `${base}/api/ai-sdk` }),
  onError: (e) => out.errors.push(String(e && e.message ? e.message : e)),
});
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
