// agui-fork.mjs forks threads with the official AG-UI client (@ag-ui/client
// HttpAgent, POST /agui): forwardedProps {fork: {from, before | after}} on
// a run of a new thread makes that thread a branch of another and runs its
// last user message there. It prints what happened as one JSON object on
// stdout; cmd/mesh/e2e/agui_fork_test.go runs it and asserts on the result.
// The client verifies every run's events itself.
//
// Environment: MESH_URL (http://host:port), THREAD_ID (the original),
// AFTER_ID and BEFORE_ID (the branches' thread ids).
//
// Scenario:
//   first, second:  on the original, "hello", then "list all resources"
//                   (a tool call); the second run's runId is the id of its
//                   user message;
//   after:          a new thread whose messages are the original's up to
//                   the first answer and "help", forwardedProps.fork
//                   {from, after: the first answer's id}: answered there;
//   afterAgain:     "list all resources" on that branch, the same
//                   forwardedProps kept: a plain run of the branch;
//   before:         a new thread, forwardedProps.fork {from, before: the
//                   second user message's id}, "help": the edit of it;
//   unknown:        a fork from a thread that does not exist: the run fails;
//   twoPoints:      before and after at once: the run fails;
//   intoOriginal:   the original as the new thread of a fork: the run fails.

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const base = process.env.MESH_URL;
const original = process.env.THREAD_ID || randomUUID();
const afterId = process.env.AFTER_ID || randomUUID();
const beforeId = process.env.BEFORE_ID || randomUUID();
if (!base) {
  console.error('MESH_URL is required');
  process.exit(2);
}

async function run(agent, name, params) {
  const rec = { name, threadId: agent.threadId, events: [], outcome: null };
  const subscriber = {
    onEvent({ event }) {
      rec.events.push(event.type);
      if (event.type === 'RUN_STARTED') rec.runId = event.runId;
    },
    onRunFinishedEvent(p) {
      rec.outcome = p.outcome;
    },
    onRunFailed({ error }) {
      rec.runFailed = String(error && error.message ? error.message : error);
    },
  };
  try {
    const res = await agent.runAgent({ tools: [], context: [], forwardedProps: {}, ...params }, subscriber);
    rec.newMessages = res.newMessages;
  } catch (err) {
    rec.error = String(err && err.stack ? err.stack : err);
  }
  console.error(`${name} on ${agent.threadId}: ${rec.error ? `error ${rec.error.split('\n')[0]}` : `outcome ${rec.outcome}`}; events ${rec.events.join(' ')}`);
  return rec;
}

const say = (agent, text) => agent.addMessage({ id: randomUUID(), role: 'user', content: text });
const answer = (msgs) => [...(msgs || [])].reverse().find((m) => m.role === 'assistant' && m.content);

const out = { original, runs: [] };
const a = new HttpAgent({ url: `${base}/agui`, threadId: original });
say(a, 'hello');
const first = await run(a, 'first', {});
out.runs.push(first);
out.firstAnswer = answer(first.newMessages)?.id ?? '';
const secondRunId = randomUUID();
say(a, 'list all resources');
out.runs.push(await run(a, 'second', { runId: secondRunId }));
out.secondUser = secondRunId;

// A branch after the first answer: the client's messages up to it, then
// the new question.
const b = new HttpAgent({ url: `${base}/agui`, threadId: afterId });
const upTo = a.messages.findIndex((m) => m.id === out.firstAnswer);
b.setMessages(structuredClone(a.messages.slice(0, upTo + 1)));
say(b, 'help');
const fork = { fork: { from: original, after: out.firstAnswer } };
out.runs.push(await run(b, 'after', { forwardedProps: fork }));
say(b, 'list all resources');
out.runs.push(await run(b, 'afterAgain', { forwardedProps: fork }));

// The edit of the second user message: a fork before it.
const c = new HttpAgent({ url: `${base}/agui`, threadId: beforeId });
say(c, 'help');
out.runs.push(await run(c, 'before', { forwardedProps: { fork: { from: original, before: secondRunId } } }));

const bad = (name, props, threadId = randomUUID()) => {
  const x = new HttpAgent({ url: `${base}/agui`, threadId });
  say(x, 'help');
  return run(x, name, { forwardedProps: { fork: props } });
};
out.runs.push(await bad('unknown', { from: randomUUID(), after: out.firstAnswer }));
out.runs.push(await bad('twoPoints', { from: original, after: out.firstAnswer, before: secondRunId }));
out.runs.push(await bad('intoOriginal', { from: afterId, after: out.firstAnswer }, original));

process.stdout.write(`${JSON.stringify(out)}\n`);
