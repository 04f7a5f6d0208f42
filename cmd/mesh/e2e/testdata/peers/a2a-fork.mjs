// a2a-fork.mjs forks contexts with the official A2A JavaScript client
// (@a2a-js/sdk 1.x, A2A 1.0): a message in a new context whose metadata,
// under the fork extension's URI, names another context and a point, with
// the extension activated in the A2A-Extensions header. It prints what
// happened as one JSON object on stdout; cmd/mesh/e2e/a2a_fork_test.go runs
// it and asserts on the result.
//
// Environment: A2A_BASE (http://host:port of the bridge), ORIGINAL,
// BRANCH, STREAMED (context ids).
//
// Scenario:
//   card:      the card's capabilities.extensions, read by the client;
//   original:  "hello", then "list all resources" in context ORIGINAL;
//   history:   GetTask of it: the message ids to fork at;
//   branch:    "help" in context BRANCH, forked before "list all resources";
//   streamed:  SendStreamingMessage "list all resources" in context
//              STREAMED, forked after the first answer;
//   unknown:   a fork from a context that does not exist: TaskNotFound;
//   taken:     a fork into ORIGINAL itself, which is no branch: refused.

import { randomUUID } from 'node:crypto';
import { ClientFactory, ServiceParameters, withA2AExtensions } from '@a2a-js/sdk/client';
import { Role, taskStateToJSON } from '@a2a-js/sdk';

const base = process.env.A2A_BASE;
const original = process.env.ORIGINAL || randomUUID();
const branch = process.env.BRANCH || randomUUID();
const streamed = process.env.STREAMED || randomUUID();
if (!base) {
  console.error('A2A_BASE is required');
  process.exit(2);
}

const message = (text, extra = {}) => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }],
  ...extra,
});

const partText = (parts) =>
  (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

const info = (task) => ({
  id: task.id,
  contextId: task.contextId,
  state: taskStateToJSON(task.status?.state),
  artifact: (task.artifacts ?? []).map((a) => partText(a.parts)).join(''),
  history: (task.history ?? []).map((m) => ({ id: m.messageId, role: m.role === Role.ROLE_USER ? 'user' : 'agent', text: partText(m.parts) })),
});

const out = {};
try {
  const client = await new ClientFactory().createFromUrl(base);
  out.extensions = (client.agentCard.capabilities?.extensions ?? []).map((e) => ({ uri: e.uri, description: e.description }));
  const uri = process.env.FORK_URI || out.extensions[0]?.uri;
  const options = { serviceParameters: ServiceParameters.create(withA2AExtensions(uri)) };
  const fork = (point) => ({ [uri]: { from: original, ...point } });

  await client.sendMessage({ message: message('hello', { contextId: original }) });
  await client.sendMessage({ message: message('list all resources', { taskId: original }) });
  out.original = info(await client.getTask({ id: original, historyLength: 10 }));
  const listed = out.original.history.find((m) => m.role === 'user' && m.text === 'list all resources');
  const answered = out.original.history.find((m) => m.role === 'agent');

  out.branch = info(await client.sendMessage({ message: message('help', { contextId: branch, metadata: fork({ before: listed?.id }) }) }, options));
  out.branchHistory = info(await client.getTask({ id: branch, historyLength: 10 }));

  out.streamed = { events: [] };
  const req = { message: message('list all resources', { contextId: streamed, metadata: fork({ after: answered?.id }) }) };
  for await (const item of client.sendMessageStream(req, options)) {
    const p = item.payload;
    if (p?.$case === 'task') out.streamed.events.push('task:' + taskStateToJSON(p.value.status.state));
    else if (p?.$case === 'statusUpdate') out.streamed.events.push('statusUpdate:' + taskStateToJSON(p.value.status.state));
    else if (p?.$case === 'artifactUpdate') {
      out.streamed.events.push('artifactUpdate');
      out.streamed.text = (out.streamed.text ?? '') + partText(p.value.artifact.parts);
    } else out.streamed.events.push(String(p?.$case));
  }
  out.streamedHistory = info(await client.getTask({ id: streamed, historyLength: 10 }));
  out.originalAfter = info(await client.getTask({ id: original, historyLength: 10 }));

  const refused = async (msg) => {
    try {
      await client.sendMessage({ message: msg }, options);
      return 'no error';
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  };
  out.unknown = await refused(message('help', { contextId: randomUUID(), metadata: { [uri]: { from: randomUUID(), after: answered?.id } } }));
  out.taken = await refused(message('help', { contextId: original, metadata: { [uri]: { from: branch, after: answered?.id } } }));
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
console.log(JSON.stringify(out));
