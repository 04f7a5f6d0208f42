// aisdk-chat.mjs makes the npm `ai` package's own chat (AbstractChat, what
// useChat wraps, with its DefaultChatTransport) on the mesh's AI SDK
// dialect (POST /api/ai-sdk), for the aisdk-*.mjs peers. Its state keeps
// the chat's messages as plain arrays (useChat keeps them in React state).

import { randomUUID } from 'node:crypto';
import { AbstractChat, DefaultChatTransport } from 'ai';

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

// newChat returns the chat for the mesh at MESH_URL (init adds to its
// options) and out, the result object: its id, the chat's errors and the
// messages its onFinish received (id, role, text).
export function newChat(init = {}) {
  const base = process.env.MESH_URL;
  if (!base) {
    console.error('MESH_URL is required');
    process.exit(2);
  }
  const out = { chatId: randomUUID(), errors: [], finished: [] };
  const chat = new Chat({
    id: out.chatId,
    transport: new DefaultChatTransport({ api: `${base}/api/ai-sdk` }),
    onError: (e) => out.errors.push(String(e && e.message ? e.message : e)),
    onFinish: ({ message }) => out.finished.push({
      id: message.id,
      role: message.role,
      text: message.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''),
    }),
    ...init,
  });
  return { chat, out };
}
