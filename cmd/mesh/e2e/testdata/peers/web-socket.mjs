// web-socket.mjs drives the bridge's WebSocket client module
// (/web/agui-socket.js) in headless Chromium, on the bridge's own page, and
// prints what it saw as one JSON object on stdout. cmd/mesh/e2e/web_test.go
// runs it and asserts on the result.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots).
//
// Steps: connect; a run whose socket is dropped (closed by the page, code
// 4000) after its first events frame, with a second run sent while the
// socket is down; at the checkpoint "kill-bridge" the test kills the
// bridge process and `mesh up` starts another, and a run after the
// reconnect; a handler taken off with off(); disconnect.
//
// Every wait is for a condition in the page, bounded by TIMEOUT_MS; nothing
// sleeps.

import { createInterface } from 'node:readline';
import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const out = { consoleErrors: [], expectedNetworkErrors: [], steps: [], screenshots: [] };
const { step } = recorder(out, artifacts);

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function checkpoint(name) {
  process.stdout.write(`${JSON.stringify({ checkpoint: name })}\n`);
  const { value, done } = await stdinLines.next();
  if (done || value.trim() !== 'ok') throw new Error(`checkpoint ${name}: the test answered ${done ? 'nothing' : value}`);
}

let bridgeDown = false;
const browser = await launchChromium(executablePath, timeout);
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = `${m.text()} @ ${m.location().url || ''}`;
    if (bridgeDown || /WebSocket connection to .* failed/.test(text)) out.expectedNetworkErrors.push(text);
    else out.consoleErrors.push(text);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
  await page.goto(`${base}/`);

  step('connect');
  await page.evaluate(async () => {
    const { AGUISocket } = await import('/web/agui-socket.js');
    const wsBase = location.origin.replace(/^http/, 'ws');
    const log = { states: [], ids: [], events: {}, errors: [], closes: [], urlCalls: 0, offCalls: 0 };
    const sock = new AGUISocket({
      url: async () => { log.urlCalls++; return `${wsBase}/agui/ws`; },
      reconnectDelayMs: 200, maxReconnectDelayMs: 2000, maxReconnectAttempts: 200,
    });
    sock.on('state', (s) => log.states.push(s));
    sock.on('open', (f) => log.ids.push(f.connectionId));
    sock.on('event', ({ threadId, event }) => (log.events[threadId] ??= []).push(event.type));
    sock.on('error', (e) => log.errors.push(e));
    sock.on('close', (c) => log.closes.push({ code: c.code, frame: c.frame?.type ?? null, reason: c.frame?.reason ?? c.reason }));
    const counted = () => { log.offCalls++; };
    sock.on('event', counted);
    sock.off('event', counted);
    window.sockLog = log;
    window.sock = sock;
    sock.connect();
  });
  await page.waitForFunction(() => window.sock.state === 'connected');

  step('a run whose socket drops');
  out.threads = await page.evaluate(() => {
    const dropped = crypto.randomUUID();
    const queued = crypto.randomUUID();
    const msg = (text) => [{ id: crypto.randomUUID(), role: 'user', content: text }];
    // After the run's first event the socket drops; a run sent then waits
    // in the queue for the next socket.
    const drop = ({ threadId }) => {
      if (threadId !== dropped) return;
      window.sock.off('event', drop);
      window.sock.ws.close(4000, 'dropped by the test');
      window.sock.run({ threadId: queued, runId: crypto.randomUUID(), messages: msg('list all resources') });
    };
    window.sock.on('event', drop);
    window.sock.run({ threadId: dropped, runId: crypto.randomUUID(), messages: msg('list all resources') });
    return { dropped, queued };
  });
  const ended = (thread) => page.waitForFunction((t) => (window.sockLog.events[t] ?? []).includes('RUN_FINISHED'), thread);
  await ended(out.threads.dropped);
  await ended(out.threads.queued);

  step('the bridge dies');
  bridgeDown = true;
  await checkpoint('kill-bridge');
  await page.waitForFunction(() => window.sock.state === 'reconnecting');
  await page.waitForFunction(() => window.sock.state === 'connected', null, { timeout: 60000 });
  bridgeDown = false;
  out.threads.after = await page.evaluate(() => {
    const threadId = crypto.randomUUID();
    window.sock.run({ threadId, runId: crypto.randomUUID(), messages: [{ id: crypto.randomUUID(), role: 'user', content: 'list all resources' }] });
    return threadId;
  });
  await ended(out.threads.after);

  step('disconnect');
  out.afterDisconnect = await page.evaluate(() => {
    window.sock.disconnect();
    return { state: window.sock.state, socket: window.sock.ws === null };
  });
  out.log = await page.evaluate(() => window.sockLog);
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
  stdinLines.return?.();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
