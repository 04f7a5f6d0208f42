// agui-ws.mjs drives AG-UI over a WebSocket (GET /agui/ws) with the npm `ws`
// client and prints what happened as one JSON object on stdout;
// cmd/mesh/e2e/agui_ws_test.go runs it and asserts on the result. Every
// run's events also go through @ag-ui/client's own verifyEvents, the check
// HttpAgent applies to an SSE stream; its complaints are reported.
//
// Environment: MESH_URL (http://host:port), TOKEN (a user and approver).
//
// Scenario, one socket with the bearer header for the first three:
//   tool:      "list all resources" runs resources_list;
//   interrupt: "add resource ws-1 with value 3" ends with an interrupt;
//   resume:    a RunAgentInput with resume [{interruptId, status:
//              "resolved", payload: {approved: true}}] completes it;
//   drop:      "list items" (a tool that waits for the test's gate): once
//              its tool call has started, the socket is dropped
//              (terminate, no close handshake); checkpoint "dropped" lets
//              the test open the gate; a new socket, authenticated by a
//              stream token in the query, reattaches with the last cursor
//              and gets the rest; a third reattaches from the run's start
//              and gets the whole run, to compare with.
//   readonly:  on the stream token's socket, a run frame gets an error
//              frame (a stream token only reads).
//   badframe:  on the third socket (bearer header), a frame that is not
//              JSON gets an error frame, and the same socket then runs a
//              turn.
// The first frame of each socket (connection_open) is reported as is.

import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { from, lastValueFrom, toArray } from 'rxjs';
import { verifyEvents } from '@ag-ui/client';

const base = process.env.MESH_URL;
const token = process.env.TOKEN;
if (!base || !token) {
  console.error('MESH_URL and TOKEN are required');
  process.exit(2);
}
const wsURL = base.replace(/^http/, 'ws') + '/agui/ws';
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

async function checkpoint(name) {
  console.log(JSON.stringify({ checkpoint: name }));
  await lines.next();
}

// Socket wraps a ws client: frames queue up until read.
class Socket {
  constructor(url, headers) {
    this.queue = [];
    this.waiters = [];
    this.ws = new WebSocket(url, { headers });
    this.ws.on('message', (data, isBinary) => {
      const frame = JSON.parse(isBinary ? data.toString() : data.toString());
      // The server's first frame names the connection; it is reported, not queued.
      if (this.opening === undefined) {
        this.opening = frame;
        if (frame.type === 'connection_open') return;
      }
      const w = this.waiters.shift();
      if (w) w(frame);
      else this.queue.push(frame);
    });
    this.closed = new Promise((resolve) => this.ws.on('close', resolve));
    this.opened = new Promise((resolve, reject) => {
      this.ws.on('open', resolve);
      this.ws.on('error', reject);
    });
  }
  send(obj) {
    this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
  }
  next(ms = 60000) {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no frame within ${ms} ms`)), ms);
      this.waiters.push((f) => {
        clearTimeout(t);
        resolve(f);
      });
    });
  }
  // untilEnd reads the frames of thread up to its RUN_FINISHED or RUN_ERROR;
  // stop(frame) may end it earlier.
  async untilEnd(thread, stop) {
    const frames = [];
    for (;;) {
      const f = await this.next();
      if (f.type === 'error') throw new Error(`error frame: ${JSON.stringify(f)}`);
      if (f.threadId !== thread) continue;
      frames.push(f);
      if (stop && stop(f)) return frames;
      if (f.events.some((e) => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')) return frames;
    }
  }
}

const events = (frames) => frames.flatMap((f) => f.events);

// verify runs the official client's verifier over a run's events.
async function verify(evs) {
  try {
    await lastValueFrom(from(evs).pipe(verifyEvents(false), toArray()));
    return null;
  } catch (err) {
    return String(err && err.message ? err.message : err);
  }
}

function runInput(threadId, text, extra = {}) {
  return {
    threadId,
    runId: randomUUID(),
    messages: text ? [{ id: randomUUID(), role: 'user', content: text }] : [],
    tools: [],
    context: [],
    forwardedProps: {},
    ...extra,
  };
}

async function report(name, frames) {
  const evs = events(frames);
  const rec = {
    name,
    types: evs.map((e) => e.type),
    seqs: frames.map((f) => f.seq),
    cursors: frames.map((f) => f.cursor),
    last: evs[evs.length - 1],
    toolResults: evs.filter((e) => e.type === 'TOOL_CALL_RESULT').map((e) => e.content),
    verifyError: await verify(evs),
  };
  console.error(`${name}: ${rec.types.join(' ')}${rec.verifyError ? ` (verify: ${rec.verifyError})` : ''}`);
  return rec;
}

const out = { runs: {} };
const auth = { Authorization: `Bearer ${token}` };
const sock = new Socket(wsURL, auth);
await sock.opened;

const thread = randomUUID();
sock.send(runInput(thread, 'list all resources'));
out.runs.tool = await report('tool', await sock.untilEnd(thread));

sock.send(runInput(thread, 'add resource ws-1 with value 3'));
out.runs.interrupt = await report('interrupt', await sock.untilEnd(thread));
const interrupts = out.runs.interrupt.last?.outcome?.interrupts ?? [];
out.interrupts = interrupts;
if (interrupts.length) {
  const resume = interrupts.map((i) => ({ interruptId: i.id, status: 'resolved', payload: { approved: true } }));
  sock.send(runInput(thread, '', { resume }));
  out.runs.resume = await report('resume', await sock.untilEnd(thread));
}

// The drop: a run whose tool waits for the gate.
const dropThread = randomUUID();
const dropInput = runInput(dropThread, 'list items');
sock.send(dropInput);
const before = await sock.untilEnd(dropThread, (f) => f.events.some((e) => e.type === 'TOOL_CALL_END'));
sock.ws.terminate();
await sock.closed;
await checkpoint('dropped');

const st = await fetch(`${base}/auth/stream-token`, { method: 'POST', headers: auth });
const { token: streamToken, param } = await st.json();
const again = new Socket(`${wsURL}?${param || 'access_token'}=${encodeURIComponent(streamToken)}`);
await again.opened;
again.send({ type: 'reattach', threadId: dropThread, runId: dropInput.runId, cursor: before[before.length - 1].cursor });
const after = await again.untilEnd(dropThread);

// The whole run, from its start cursor, on a third socket.
const [run, start] = before[0].cursor.split('.');
const third = new Socket(wsURL, auth);
await third.opened;
third.send({ type: 'reattach', threadId: dropThread, runId: dropInput.runId, cursor: `${run}.${start}.${start}` });
const whole = [before[0], ...(await third.untilEnd(dropThread))];
out.drop = {
  before: await report('drop-before', before),
  after: await report('drop-after', after),
  joined: await report('drop-joined', [...before, ...after]),
  whole: await report('drop-whole', whole),
  joinedJSON: JSON.stringify([...before, ...after]),
  wholeJSON: JSON.stringify(whole),
};

// A stream token's socket reads only: a run is refused.
again.send(runInput(randomUUID(), 'list all resources'));
out.readOnly = await again.next();

// A bad frame, then a turn on the same socket.
third.send('this is not JSON');
out.badFrame = await third.next();
const badThread = randomUUID();
third.send(runInput(badThread, 'list all resources'));
out.runs.afterBadFrame = await report('after-bad-frame', await third.untilEnd(badThread));

out.connections = [sock.opening, again.opening, third.opening];
again.ws.close();
third.ws.close();
console.log(JSON.stringify(out));
process.exit(0);
