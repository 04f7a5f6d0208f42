// web-error.mjs opens the web chat page of a running mesh whose model
// fails, sends a message, and reports what a person sees of the failed
// run: the run status and its text, the composer, the last message. It
// prints one JSON object on stdout; cmd/mesh/e2e/web_error_test.go asserts
// on it.
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

  step('send a message the model fails to answer');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await page.waitForFunction(() => document.querySelector('#run-status').dataset.status === 'error');
  out.status = await page.evaluate(() => {
    const s = document.querySelector('#run-status');
    return { status: s.dataset.status, text: s.textContent, title: s.title };
  });
  await shot(page, 'failed-run');

  step('the composer takes a new message');
  await page.waitForFunction(() => !document.querySelector('#send').disabled || document.querySelector('#message-input').value === '');
  await page.locator('#message-input').fill('try again');
  out.sendEnabled = !(await page.locator('#send').isDisabled());
  out.streaming = await page.evaluate(() => [...document.querySelectorAll('#messages li.msg.assistant')].some((m) => m.dataset.streaming === 'true'));
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
process.exit(out.error ? 1 : 0);
