// agui-files.mjs sends a user message with an image with the official AG-UI
// client (@ag-ui/client HttpAgent): a text part and an image part whose
// source carries the bytes (AG-UI 1.0 content parts), and prints the run as
// one JSON object on stdout. cmd/mesh/e2e/files_test.go runs it and checks
// that the model got the image's bytes.
//
// Environment: AGUI_URL (http://host:port/agui), THREAD_ID, IMAGE_B64 (the
// image's bytes in base64), IMAGE_TYPE (its media type).

import { HttpAgent } from '@ag-ui/client';
import { randomUUID } from 'node:crypto';

const url = process.env.AGUI_URL;
const threadId = process.env.THREAD_ID || randomUUID();
const agent = new HttpAgent({ url, threadId });
agent.addMessage({
  id: randomUUID(),
  role: 'user',
  content: [
    { type: 'text', text: 'what is in this picture?' },
    { type: 'image', source: { type: 'data', value: process.env.IMAGE_B64, mimeType: process.env.IMAGE_TYPE } },
  ],
});
const out = { threadId, events: [] };
try {
  const res = await agent.runAgent({ tools: [], context: [], forwardedProps: {} }, {
    onEvent({ event }) { out.events.push(event.type); },
    onRunFailed({ error }) { out.runFailed = String(error && error.message ? error.message : error); },
  });
  out.newMessages = res.newMessages;
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
console.log(JSON.stringify(out));
