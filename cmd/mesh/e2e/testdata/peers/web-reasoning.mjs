// web-reasoning.mjs opens the web chat page of a running mesh whose model
// reasons before it answers, sends a message, and reports how the page
// shows the reasoning: the "Reasoning" disclosures, whether they are
// collapsed, their text, live and again after a reload (from the
// history). It prints one JSON object on stdout;
// cmd/mesh/e2e/web_reasoning_test.go asserts on it.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots), TIMEOUT_MS.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

// reasoning lists the page's reasoning disclosures.
const reasoning = (page) => page.evaluate(() => [...document.querySelectorAll('#messages li.reasoning')].map((li) => ({
  summary: li.querySelector('summary').textContent,
  open: li.querySelector('details').open,
  text: li.querySelector('.reasoning-body').textContent,
  source: li.dataset.source,
})));

const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, artifacts);
const browser = await launchChromium(executablePath, timeout);
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));

  step('open the page');
  await page.goto(base);
  await page.click('#new-conversation');
  await page.waitForFunction(() => location.hash.length > 1);

  step('send a message; the model reasons, calls a tool, reasons and answers');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await page.waitForFunction(() => document.querySelector('#run-status').dataset.status === 'idle'
    && document.querySelectorAll('#messages li.reasoning').length >= 2);
  out.live = await reasoning(page);
  await shot(page, 'reasoning-collapsed');

  step('open the first disclosure');
  await page.locator('#messages li.reasoning summary').first().click();
  out.openedVisible = await page.locator('#messages li.reasoning .reasoning-body').first().isVisible();
  await shot(page, 'reasoning-open');

  step('reload: the reasoning comes back from the history');
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('#messages li.reasoning').length >= 2);
  out.reloaded = await reasoning(page);
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
process.exit(out.error ? 1 : 0);
