// web-chain.mjs drives the web page of Agent A, which delegates to Agent B
// over A2A, in headless Chromium: a request that B must have approved
// shows A's approval box (a proxy approval), Approve runs it on B, and A's
// answer shows the result. It prints what it saw as one JSON object on
// stdout; cmd/mesh/e2e/web_chain_test.go runs it and asserts on the result.
//
// Environment: BASE_URL (Agent A, http://host:port), CHROMIUM (the browser
// binary), ARTIFACTS (a directory for screenshots), NAME (the resource to
// add). Every wait is for a DOM condition, bounded by TIMEOUT_MS.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const name = process.env.NAME || 'web-chain-1';
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, artifacts);
const browser = await launchChromium(executablePath, timeout);

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => { if (m.type() === 'error') out.consoleErrors.push(`${m.text()} @ ${m.location().url || ''}`); });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));

  step('open the page');
  await page.goto(`${base}/`);
  await page.locator('#welcome').waitFor({ state: 'visible' });
  step('new conversation');
  await page.click('#new-conversation');
  await page.waitForFunction(() => location.hash.length > 1);
  out.conversationId = await page.evaluate(() => location.hash.slice(1));

  step(`send "add resource ${name} with value 5"`);
  await page.locator('#message-input').fill(`add resource ${name} with value 5`);
  await page.click('#send');
  await page.locator('#approval button.approve').waitFor({ state: 'visible' });
  await page.waitForFunction(() => document.querySelector('#run-status').dataset.status === 'waiting_approval');
  out.approvalText = await page.locator('#approval').innerText();
  out.approvalUUID = await page.locator('#approval').getAttribute('data-uuid');
  await shot(page, 'chain-approval');

  step('approve');
  await page.click('#approval button.approve');
  await page.locator('#approval').waitFor({ state: 'hidden' });
  await page.waitForFunction((n) => {
    const m = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].pop();
    return m && m.dataset.streaming === 'false' && m.textContent.includes(n) &&
      document.querySelector('#run-status').dataset.status === 'idle';
  }, name);
  out.reply = await page.evaluate(() => [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].pop().textContent);
  await shot(page, 'chain-approved');
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
