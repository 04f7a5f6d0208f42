// web-docs.mjs opens /docs of a running mesh in headless Chromium (Debian's,
// through playwright-core), waits until the page has rendered the bridge's
// OpenAPI document, runs one "Try it" (GET /health), and prints what it saw
// as one JSON object on stdout. cmd/mesh/e2e/openapi_test.go asserts on it.
//
// Environment: BASE_URL, CHROMIUM, ARTIFACTS, TIMEOUT_MS.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, process.env.ARTIFACTS);
const browser = await launchChromium(process.env.CHROMIUM || '/usr/bin/chromium', timeout);
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => { if (m.type() === 'error') out.consoleErrors.push(`${m.text()} @ ${m.location().url || ''}`); });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
  step('open /docs');
  await page.goto(`${base}/docs`);
  await page.waitForFunction(() => document.querySelectorAll('#routes section').length > 0);
  out.sections = await page.locator('#routes section').count();
  out.operationIds = await page.locator('#routes section').evaluateAll((ss) => ss.map((s) => s.id));
  out.tags = await page.locator('#routes h2.tag').allTextContents();
  step('try GET /health');
  const health = page.locator('#get_health');
  await health.locator('summary').click();
  await health.locator('button').click();
  await page.waitForFunction(() => /^200\n/.test(document.querySelector('#get_health pre.out').textContent));
  out.tryHealth = await health.locator('pre.out').textContent();
  await shot(page, 'docs');
} catch (err) {
  out.error = String(err && err.stack || err);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
