// agui-state.mjs runs the official AG-UI client (@ag-ui/client HttpAgent)
// against a mesh's POST /agui on a conversation whose tools change its
// state, and prints what the client ended with as one JSON object on
// stdout. cmd/mesh/e2e/agui_state_test.go runs it and compares the client's
// agent.state with the conversation's state on the server.
//
// Environment: AGUI_URL (http://host:port/agui), THREAD_ID (the conversation).
//
// Scenario:
//   clock:  "clock in" runs clock_in, an MCP tool whose result carries a
//           state patch in _meta (STATE_DELTA after its TOOL_CALL_RESULT);
//   set:    "set state mode to night" runs the built-in set_state;
//   fresh:  a second client of the same thread that knows nothing of the
//           state runs "help": it starts from the run's STATE_SNAPSHOT.
//
// The client applies STATE_DELTA with fast-json-patch and only warns when a
// patch fails: the warnings are reported under "patchFailures".

import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';

const url = process.env.AGUI_URL;
const threadId = process.env.THREAD_ID || randomUUID();
if (!url) {
  console.error('AGUI_URL is required');
  process.exit(2);
}

const patchFailures = [];
const warn = console.warn;
console.warn = (...args) => {
  const text = args.map(String).join(' ');
  if (/patch/i.test(text)) patchFailures.push(text);
  warn(...args);
};

// run executes one runAgent call of agent and reports its events and the
// client's state after it.
async function run(agent, name, message) {
  const rec = { name, events: [], deltas: [], outcome: null };
  agent.addMessage({ id: randomUUID(), role: 'user', content: message });
  const subscriber = {
    onEvent({ event }) {
      rec.events.push(event.type);
      if (event.type === 'STATE_DELTA') rec.deltas.push(event.delta);
    },
    onRunFinishedEvent(p) {
      rec.outcome = p.outcome;
    },
  };
  try {
    await agent.runAgent({ tools: [], context: [], forwardedProps: {} }, subscriber);
  } catch (err) {
    rec.error = String(err && err.stack ? err.stack : err);
  }
  rec.state = structuredClone(agent.state);
  console.error(`${name}: ${rec.error ? `error ${rec.error.split('\n')[0]}` : `outcome ${rec.outcome}`}; events ${rec.events.join(' ')}; state ${JSON.stringify(rec.state)}`);
  return rec;
}

const out = { threadId, runs: [] };
const agent = new HttpAgent({ url, threadId });
out.runs.push(await run(agent, 'clock', 'clock in'));
out.runs.push(await run(agent, 'set', 'set state mode to night'));
const fresh = new HttpAgent({ url, threadId });
out.runs.push(await run(fresh, 'fresh', 'help'));
out.patchFailures = patchFailures;
process.stdout.write(`${JSON.stringify(out)}\n`);
