// mcp-client.mjs drives the mesh's /mcp with the official MCP TypeScript
// SDK's client over Streamable HTTP and prints what happened as one JSON
// object on stdout; cmd/mesh/e2e/mcp_server_test.go runs it.
//
// Environment: MESH_URL, TOKEN (optional bearer token).
//
// Scenario:
//   tools:    tools/list;
//   first:    "list all resources" to agent_resource-manager, with
//             progress (onprogress);
//   second:   the same with the first answer's conversation_id;
//   cancel:   "list items" to agent_gatekeeper when GATE is set, aborted
//             once a progress says the tool was called (the SDK sends
//             notifications/cancelled).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const base = process.env.MESH_URL;
if (!base) {
  console.error('MESH_URL is required');
  process.exit(2);
}
const headers = process.env.TOKEN ? { Authorization: `Bearer ${process.env.TOKEN}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } });
const client = new Client({ name: 'e2e-ts', version: '1.0.0' });
await client.connect(transport);

const out = {};
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);

const call = async (name, args, extra = {}) => {
  const progress = [];
  try {
    const res = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: (p) => progress.push(p.message),
      timeout: 120000,
      ...extra,
    });
    return { text: res.content.map((c) => c.text || '').join(''), structured: res.structuredContent, isError: !!res.isError, progress };
  } catch (err) {
    return { error: String(err && err.message ? err.message : err), progress };
  }
};

if (process.env.GATE) {
  const ac = new AbortController();
  out.cancel = await call('agent_gatekeeper', { message: 'list items' }, {
    signal: ac.signal,
    onprogress: (p) => {
      if (p.message.startsWith('calling ')) ac.abort();
    },
  });
  // The SDK sends notifications/cancelled as the call is aborted: a client
  // that stays connected (as a real one does) lets it go out.
  await new Promise((resolve) => setTimeout(resolve, 1000));
} else {
  out.first = await call('agent_resource-manager', { message: 'list all resources' });
  const conv = out.first.structured && out.first.structured.conversation_id;
  out.second = await call('agent_resource-manager', { message: 'list all resources', conversation_id: conv });
}
await client.close();
console.log(JSON.stringify(out));
