// a2a-js-run.mjs drives a mesh with the official A2A JavaScript client
// (@a2a-js/sdk 1.x, speaking A2A 1.0: the A2A-Version: 1.0 header, ProtoJSON
// objects) and prints what happened as one JSON object on stdout.
// cmd/mesh/e2e/a2a_server_test.go runs it and asserts on the result.
//
// The client parses every answer with the SDK's own ProtoJSON readers and
// checks JSON-RPC ids; a failure is reported under "error" with its stack.
//
// Environment: A2A_BASE (http://host:port of the mesh's bridge), A2A_TOKEN
// (sent as Authorization when set).
//
// Scenario:
//   card:      ClientFactory.createFromUrl picks the card's 1.0 JSONRPC interface
//   send:      SendMessage "list all resources" → completed task, reply as artifact
//   get:       GetTask of that task
//   approval:  "add resource js-peer with value 6" → input-required; "yes" on the same
//              task → completed
//   stream:    SendStreamingMessage "list all resources" → the stream items
//   list:      ListTasks with pageSize 2
//   notFound:  GetTask of an unknown task → TaskNotFoundError

import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, taskStateToJSON } from '@a2a-js/sdk';

const base = process.env.A2A_BASE;
if (!base) {
  console.error('A2A_BASE is required');
  process.exit(2);
}
const serviceParameters = process.env.A2A_TOKEN ? { Authorization: process.env.A2A_TOKEN } : {};
const options = { serviceParameters };

const message = (text, taskId) => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }],
  ...(taskId ? { taskId } : {}),
});

const partText = (parts) =>
  (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

const info = (task) => ({
  id: task.id,
  contextId: task.contextId,
  state: taskStateToJSON(task.status?.state),
  artifacts: task.artifacts?.length ?? 0,
  artifact: (task.artifacts ?? []).map((a) => partText(a.parts)).join(''),
  history: task.history?.length ?? 0,
  statusText: partText(task.status?.message?.parts),
  approval: (task.status?.message?.parts ?? []).find((p) => p.content?.$case === 'data')?.content.value?.approval?.uuid ?? '',
});

const out = {};
try {
  const client = await new ClientFactory().createFromUrl(base);
  out.protocolVersion = client.protocolVersion;
  out.card = { name: client.agentCard.name, interfaces: client.agentCard.supportedInterfaces };

  const sent = await client.sendMessage({ message: message('list all resources') }, options);
  out.send = info(sent);
  out.get = info(await client.getTask({ id: sent.id, historyLength: 1 }, options));

  const paused = await client.sendMessage({ message: message('add resource js-peer with value 6') }, options);
  out.paused = info(paused);
  out.approved = info(await client.sendMessage({ message: message('yes', paused.id) }, options));

  out.stream = { events: [] };
  for await (const item of client.sendMessageStream({ message: message('list all resources') }, options)) {
    const p = item.payload;
    switch (p?.$case) {
      case 'task':
        out.stream.id = p.value.id;
        out.stream.events.push('task:' + taskStateToJSON(p.value.status.state));
        break;
      case 'statusUpdate':
        out.stream.events.push('statusUpdate:' + taskStateToJSON(p.value.status.state));
        break;
      case 'artifactUpdate':
        out.stream.events.push('artifactUpdate');
        out.stream.text = (out.stream.text ?? '') + partText(p.value.artifact.parts);
        break;
      default:
        out.stream.events.push(String(p?.$case));
    }
  }

  const page = await client.listTasks({ pageSize: 2 }, options);
  out.list = { tasks: page.tasks.map((t) => t.id), nextPageToken: page.nextPageToken, pageSize: page.pageSize, totalSize: page.totalSize };

  try {
    await client.getTask({ id: 'no-such-task' }, options);
    out.notFound = 'no error';
  } catch (err) {
    out.notFound = err.name;
  }
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
console.log(JSON.stringify(out));
