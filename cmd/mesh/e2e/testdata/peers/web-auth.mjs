// web-auth.mjs drives the web page of a mesh with HTTP authentication on,
// in headless Chromium, and prints what it saw as one JSON object on
// stdout (cmd/mesh/e2e/web_auth_test.go asserts on it):
//
//   - without a token the page shows the sign-in prompt (screenshot);
//   - a wrong token is refused and the prompt says so;
//   - with TOKEN it lists, streams a tool turn through an EventSource that
//     carries a stream token, shows an approval, approves it, and reloads
//     still signed in (the token is in session storage);
//   - after "Sign out" the prompt is back and the token gone.
//
// Environment: BASE_URL, CHROMIUM, ARTIFACTS, TOKEN (roles user and
// approver), TIMEOUT_MS.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const token = process.env.TOKEN;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts || !token) {
  console.error('BASE_URL, ARTIFACTS and TOKEN are required');
  process.exit(2);
}

const out = { screenshots: [], consoleErrors: [], steps: [], streamURLs: [], authHeaders: 0, requests: 0 };
const { step, shot } = recorder(out, artifacts);
const browser = await launchChromium(executablePath, timeout);

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    // The 401s the page gets before it signs in are expected.
    if (m.type() === 'error' && !/401|Unauthorized/.test(m.text())) out.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.includes('/events')) out.streamURLs.push(u.pathname + u.search);
    if (u.pathname.startsWith('/web/') || u.pathname === '/') return;
    out.requests++;
    if ((r.headers().authorization || '') === `Bearer ${token}`) out.authHeaders++;
  });

  step('open the page without a token');
  await page.goto(`${base}/`);
  await page.locator('#signin').waitFor({ state: 'visible' });
  out.promptWithoutToken = await page.locator('#signin').innerText();
  out.listedWithoutToken = await page.locator('.conv-item').count();
  await shot(page, 'signin-prompt');

  step('a wrong token');
  await page.locator('#signin-token').fill('not-the-right-token-000');
  await page.click('#signin-submit');
  await page.locator('#signin-error').waitFor({ state: 'visible' });
  out.wrongTokenError = await page.locator('#signin-error').textContent();
  await shot(page, 'signin-refused');

  step('sign in');
  await page.locator('#signin-token').fill(token);
  await page.click('#signin-submit');
  await page.locator('#signin').waitFor({ state: 'hidden' });
  await page.locator('#welcome').waitFor({ state: 'visible' });
  out.who = await page.locator('#who-name').textContent();
  out.storedToken = await page.evaluate(() => sessionStorage.getItem('agentmesh.token') !== null);

  step('send "list all resources"');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await page.locator('.tool-call[data-name="resources_list"][data-status="success"]').waitFor();
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].pop();
    return m && m.dataset.streaming === 'false' && m.dataset.source === 'stream' && document.querySelector('#run-status').dataset.status === 'idle';
  });
  out.conversationId = await page.evaluate(() => location.hash.slice(1));

  step('an approval');
  await page.locator('#message-input').fill('add resource web-auth with value 3');
  await page.click('#send');
  await page.locator('#approval button.approve').waitFor({ state: 'visible' });
  await shot(page, 'signed-in-approval');
  await page.click('#approval button.approve');
  await page.locator('#approval').waitFor({ state: 'hidden' });
  await page.locator('.tool-call[data-name="resources_add"][data-status="success"]').waitFor();
  await page.waitForFunction(() => document.querySelector('#run-status').dataset.status === 'idle');
  await shot(page, 'signed-in-approved');

  step('reload: still signed in');
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('#messages li.tool-call[data-status="success"]').length === 2);
  await page.waitForFunction(() => document.querySelector('#connection').hidden);
  out.promptAfterReload = await page.locator('#signin').isVisible();

  step('sign out');
  await page.click('#signout');
  await page.locator('#signin').waitFor({ state: 'visible' });
  out.storedAfterSignOut = await page.evaluate(() => sessionStorage.getItem('agentmesh.token'));
  await shot(page, 'signed-out');
  await ctx.close();
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
