// web-ops-mesh.mjs watches the mesh view of the web page (#/mesh) in
// headless Chromium while the test kills the agent process, and prints
// what it saw as one JSON object on stdout (cmd/mesh/e2e/web_ops_test.go
// asserts on it):
//
//   - every role's nodes up, the charts drawn (screenshot);
//   - at checkpoint "kill-agent" the test kills the agent: how long until
//     its node turns red (late, then down) (screenshot);
//   - at checkpoint "queue-turn" the test sends a message while no agent
//     runs: the agent's work queue shows it pending (screenshot); at
//     "queue-seen" the test checks the API against the same state;
//   - the supervisor starts the agent again: its node turns green, the
//     turn leaves the queue, and the turns chart moves (screenshot).
//
// Environment: BASE_URL, CHROMIUM, ARTIFACTS, TIMEOUT_MS. Every wait is for
// a DOM condition; nothing sleeps.

import { createInterface } from 'node:readline';
import { launchChromium, recorder } from './browser.mjs';

const env = process.env;
const timeout = Number(env.TIMEOUT_MS || 20000);
if (!env.BASE_URL || !env.ARTIFACTS) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function checkpoint(name) {
  process.stdout.write(`${JSON.stringify({ checkpoint: name })}\n`);
  const { value, done } = await stdinLines.next();
  if (done || value.trim() !== 'ok') throw new Error(`checkpoint ${name}: the test answered ${done ? 'nothing' : value}`);
}

const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, env.ARTIFACTS);
const browser = await launchChromium(env.CHROMIUM || '/usr/bin/chromium', timeout);
const agent = '.node[data-role="agent"]';
const queue = 'tr.queue[data-role="agent"][data-name="resource-manager"]';

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    // While the agent is down nothing fails on the page; an error is one.
    if (m.type() === 'error') out.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));

  step('open #/mesh');
  await page.goto(`${env.BASE_URL}/#/mesh`);
  await page.locator(`${agent}[data-state="ready"]`).waitFor();
  await page.waitForFunction(() => Number(document.querySelector('.chart[data-metric="events_per_s"]').dataset.points || 0) > 0);
  out.roles = await page.$$eval('.role-group', (gs) => gs.map((g) => g.dataset.role));
  out.nodesUp = await page.$$eval('.node', (ns) => ns.map((n) => `${n.dataset.role}:${n.dataset.state}`));
  out.agentNode = await page.locator(agent).getAttribute('data-node');
  out.detection = await page.locator('#detection').textContent();
  out.charts = await page.$$eval('.chart', (cs) => cs.map((c) => c.dataset.metric));
  await shot(page, 'mesh-all-up');

  step('the agent is killed');
  await checkpoint('kill-agent');
  const t0 = Date.now();
  await page.waitForFunction((sel) => ['late', 'down'].includes(document.querySelector(sel).dataset.state), agent);
  out.redAfterMs = Date.now() - t0;
  out.redState = await page.locator(agent).getAttribute('data-state');
  await page.locator(`${agent}[data-state="down"]`).waitFor();
  out.downAfterMs = Date.now() - t0;
  await shot(page, 'mesh-agent-down');

  step('a message while no agent runs');
  await checkpoint('queue-turn');
  await page.waitForFunction((sel) => {
    const row = document.querySelector(sel);
    return row && Number(row.dataset.pending) >= 1;
  }, queue);
  out.queuePending = Number(await page.locator(queue).getAttribute('data-pending'));
  out.agentStateWhileQueued = await page.locator(agent).getAttribute('data-state');
  await shot(page, 'mesh-queue-pending');
  await checkpoint('queue-seen');

  step('the agent is back');
  await page.locator(`${agent}[data-state="ready"]`).waitFor({ timeout: 3 * timeout });
  out.upAfterMs = Date.now() - t0;
  await page.waitForFunction((sel) => {
    const row = document.querySelector(sel);
    return row && row.dataset.pending === '0' && row.dataset.working === '0';
  }, queue);
  await page.waitForFunction(() => Number(document.querySelector('.chart[data-metric="turns_per_s"]').dataset.peak || 0) > 0);
  out.systemEvents = await page.$$eval('#system-events li', (ls) => ls.map((l) => `${l.dataset.name}:${l.dataset.node}`));
  out.turnsPeak = Number(await page.locator('.chart[data-metric="turns_per_s"]').getAttribute('data-peak'));
  await shot(page, 'mesh-agent-back');
  await ctx.close();
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
