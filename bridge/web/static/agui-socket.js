// agui-socket.js: a client of the bridge's AG-UI WebSocket (GET /agui/ws)
// for pages and programs that want its connection handled for them. It is
// served at /web/agui-socket.js and has no dependency.
//
//   import { AGUISocket } from '/web/agui-socket.js';
//   const sock = new AGUISocket({ url: () => `${wsBase}/agui/ws?access_token=${token}` });
//   sock.on('event', ({ threadId, event }) => …);   // every AG-UI event
//   sock.on('state', (state) => …);                  // connecting, connected …
//   sock.connect();
//   sock.run({ threadId, runId, messages: [...] });
//
// States: disconnected (before connect, after disconnect), connecting (the
// first attempt), connected (connection_open received), reconnecting (the
// socket dropped or the server closed it: waiting reconnectDelayMs, doubled
// each failed attempt up to maxReconnectDelayMs), error (maxReconnectAttempts
// failed in a row; connect() starts again).
//
// After a reconnect the socket reattaches: each run not yet ended from the
// last cursor it got, each follow after the last sequence it got, so that
// every event arrives once. Frames sent while not connected wait in a queue
// and go out, in order, once the socket is open. url may be a function (or
// an async one) called for every attempt: a browser's stream token expires,
// and a reconnect needs a fresh one.
//
// Events (on/off): state (the new state), open (the connection_open frame),
// close ({code, reason}, and the server's connection_close frame when it
// sent one), frame (every frame the server sends), event ({threadId, runId,
// event}: each AG-UI event of an events frame), error (an error frame, or
// {code: 'reconnect_failed'} when the attempts ran out).

export const State = Object.freeze({
  DISCONNECTED: 'disconnected',
  CONNECTING: 'connecting',
  CONNECTED: 'connected',
  RECONNECTING: 'reconnecting',
  ERROR: 'error',
});

const runEnds = new Set(['RUN_FINISHED', 'RUN_ERROR']);

export class AGUISocket {
  constructor({ url, maxReconnectAttempts = 10, reconnectDelayMs = 1000, maxReconnectDelayMs = 30000, WebSocket: impl } = {}) {
    if (!url) throw new Error('AGUISocket: url is required');
    this.url = url;
    this.maxReconnectAttempts = maxReconnectAttempts;
    this.reconnectDelayMs = reconnectDelayMs;
    this.maxReconnectDelayMs = maxReconnectDelayMs;
    this.WebSocket = impl || globalThis.WebSocket;
    this.state = State.DISCONNECTED;
    this.connectionId = null;
    this.reconnectAttempts = 0;
    this.handlers = new Map();
    this.pending = []; // frames waiting for an open socket
    this.runs = new Map(); // threadId -> {runId, cursor}, runs not yet ended
    this.follows = new Map(); // threadId -> last seq
    this.ws = null;
    this.timer = null;
    this.wanted = false; // connect() called and no disconnect() since
  }

  on(type, handler) {
    if (!this.handlers.has(type)) this.handlers.set(type, new Set());
    this.handlers.get(type).add(handler);
    return this;
  }

  off(type, handler) {
    this.handlers.get(type)?.delete(handler);
    return this;
  }

  emit(type, value) {
    for (const h of [...(this.handlers.get(type) ?? [])]) {
      try {
        h(value);
      } catch (e) {
        // A handler's failure must not break the socket's bookkeeping.
        setTimeout(() => { throw e; });
      }
    }
  }

  setState(state) {
    if (this.state === state) return;
    this.state = state;
    this.emit('state', state);
  }

  // connect opens the socket; it is a no-op while one is open or opening.
  connect() {
    this.wanted = true;
    if (this.ws || this.timer) return;
    this.reconnectAttempts = 0;
    this.setState(State.CONNECTING);
    this.open();
  }

  // disconnect closes the socket for good (no reconnect); the runs go on
  // in the mesh, and connect() reattaches them.
  disconnect() {
    this.wanted = false;
    clearTimeout(this.timer);
    this.timer = null;
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000, 'client disconnect');
    this.connectionId = null;
    this.setState(State.DISCONNECTED);
  }

  // reconnect drops the socket and opens a new one now.
  reconnect() {
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000, 'client reconnect');
    clearTimeout(this.timer);
    this.timer = null;
    this.wanted = true;
    this.setState(State.RECONNECTING);
    this.open();
  }

  async open() {
    let url;
    try {
      url = typeof this.url === 'function' ? await this.url() : this.url;
    } catch (e) {
      this.dropped({ code: 0, reason: `url: ${e.message}` });
      return;
    }
    if (!this.wanted) return;
    const ws = new this.WebSocket(url);
    this.ws = ws;
    let goodbye = null;
    ws.onmessage = (m) => {
      if (this.ws !== ws) return;
      let f;
      try {
        f = JSON.parse(m.data);
      } catch {
        return;
      }
      if (f.type === 'connection_close') goodbye = f;
      this.receive(f);
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return; // closed on purpose: disconnect or reconnect
      this.ws = null;
      this.connectionId = null;
      this.emit('close', { code: e.code, reason: e.reason, frame: goodbye });
      this.dropped(e);
    };
  }

  // dropped schedules the next attempt, or gives up.
  dropped() {
    if (!this.wanted) return;
    if (this.reconnectAttempts >= this.maxReconnectAttempts) {
      this.setState(State.ERROR);
      this.emit('error', { code: 'reconnect_failed', message: `no connection after ${this.reconnectAttempts} attempts` });
      this.wanted = false;
      return;
    }
    const delay = Math.min(this.reconnectDelayMs * 2 ** this.reconnectAttempts, this.maxReconnectDelayMs);
    this.reconnectAttempts++;
    this.setState(State.RECONNECTING);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.open();
    }, delay);
  }

  receive(f) {
    this.emit('frame', f);
    switch (f.type) {
      case 'connection_open':
        this.connectionId = f.connectionId;
        this.reconnectAttempts = 0;
        this.setState(State.CONNECTED);
        this.emit('open', f);
        this.resume();
        return;
      case 'error':
        this.emit('error', f);
        return;
      case 'events':
        break;
      default:
        return;
    }
    if (f.runId && f.cursor && this.runs.has(f.threadId)) {
      const run = this.runs.get(f.threadId);
      if (run.runId === f.runId) run.cursor = f.cursor;
    } else if (!f.runId && this.follows.has(f.threadId)) {
      this.follows.set(f.threadId, f.seq);
    }
    for (const event of f.events ?? []) {
      if (runEnds.has(event.type) && this.runs.get(f.threadId)?.runId === f.runId) this.runs.delete(f.threadId);
      this.emit('event', { threadId: f.threadId, runId: f.runId, event });
    }
  }

  // resume reattaches what the socket had open, then sends the queue.
  resume() {
    for (const [threadId, run] of this.runs) {
      if (run.cursor) this.write({ type: 'reattach', threadId, runId: run.runId, cursor: run.cursor });
    }
    for (const [threadId, after] of this.follows) {
      this.write(after ? { type: 'follow', threadId, after } : { type: 'follow', threadId });
    }
    const queue = this.pending;
    this.pending = [];
    for (const f of queue) this.write(f);
  }

  write(frame) {
    this.ws.send(JSON.stringify(frame));
  }

  // send sends a frame now when connected, else when the socket opens.
  send(frame) {
    // A socket closing already would drop the frame: queue it instead.
    if (this.state === State.CONNECTED && this.ws?.readyState === 1) this.write(frame);
    else this.pending.push(frame);
  }

  // run starts a run (a RunAgentInput); its events come as 'event'.
  run(input) {
    if (!input?.threadId || !input?.runId) throw new Error('AGUISocket.run: threadId and runId are required');
    this.runs.set(input.threadId, { runId: input.runId, cursor: null });
    this.send({ type: 'run', tools: [], context: [], state: {}, forwardedProps: {}, ...input });
  }

  // follow sends every event of a thread, after seq after when given.
  follow(threadId, after) {
    this.follows.set(threadId, after ?? 0);
    this.send(after ? { type: 'follow', threadId, after } : { type: 'follow', threadId });
  }

  unfollow(threadId) {
    this.follows.delete(threadId);
    this.send({ type: 'unfollow', threadId });
  }

  // cancel stops the thread's run: it ends with RUN_FINISHED, cancelled.
  cancel(threadId, runId) {
    this.send(runId ? { type: 'cancel', threadId, runId } : { type: 'cancel', threadId });
  }
}
