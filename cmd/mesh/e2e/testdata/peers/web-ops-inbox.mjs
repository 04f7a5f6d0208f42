// web-ops-inbox.mjs drives the approvals inbox of the web page (#/approvals)
// in headless Chromium as an approver would, and prints what it saw as one
// JSON object on stdout (cmd/mesh/e2e/web_ops_test.go asserts on it):
//
//   - signed in with TOKEN (an approver), the inbox lists the three pending
//     approvals of CONV_A (two) and CONV_B (one) (screenshot);
//   - approve CONV_A's alpha-1, reject CONV_B's with a reason: both leave
//     the list and show in the history (screenshot);
//   - at checkpoint "fourth" the test makes a fourth approval in a new
//     conversation: it appears without a reload (screenshot);
//   - the two left are rejected at once (select all, Reject selected);
//   - signed in with USER_TOKEN (a user), the page offers no inbox and
//     #/approvals says why.
//
// Environment: BASE_URL, CHROMIUM, ARTIFACTS, TOKEN, USER_TOKEN, CONV_A,
// CONV_B, TIMEOUT_MS. Every wait is for a DOM condition; nothing sleeps.

import { createInterface } from 'node:readline';
import { launchChromium, recorder } from './browser.mjs';

const env = process.env;
const timeout = Number(env.TIMEOUT_MS || 20000);
for (const k of ['BASE_URL', 'ARTIFACTS', 'TOKEN', 'USER_TOKEN', 'CONV_A', 'CONV_B']) {
  if (!env[k]) {
    console.error(`${k} is required`);
    process.exit(2);
  }
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

async function signedIn(token) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await ctx.addInitScript((t) => sessionStorage.setItem('agentmesh.token', t), token);
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
  return { ctx, page };
}

// entries reads the pending approvals the page shows, in order.
function entries(page) {
  return page.$$eval('#pending .inbox-item', (items) => items.map((li) => ({
    uuid: li.dataset.uuid,
    conversation: li.dataset.conversation,
    tool: li.dataset.tool,
    text: li.innerText,
    args: li.querySelector('.args').textContent,
    waited: li.querySelector('.waited').textContent,
  })));
}

try {
  step('sign in as the approver, open #/approvals');
  const { ctx, page } = await signedIn(env.TOKEN);
  await page.goto(`${env.BASE_URL}/#/approvals`);
  await page.evaluate(() => { window.notReloaded = true; });
  await page.waitForFunction(() => document.querySelectorAll('#pending .inbox-item').length === 3);
  await page.waitForFunction(() => [...document.querySelectorAll('#pending .waited')].every((e) => e.textContent.startsWith('waiting')));
  out.navApprovals = await page.locator('#nav-approvals').isVisible();
  out.first = await entries(page);
  await shot(page, 'inbox-three-pending');

  step('approve alpha-1, reject the other conversation\'s with a reason');
  const alpha = out.first.find((e) => e.conversation === env.CONV_A && e.args.includes('"alpha-1"'));
  if (!alpha) throw new Error('no approval of alpha-1 in the first conversation');
  await page.locator(`#pending .inbox-item[data-uuid="${alpha.uuid}"] button.approve`).click();
  // The stream takes the decided item off the list, and the others move
  // up: act on them once it has (a click aimed at a moving button can land
  // where it was), as a person would.
  await page.waitForFunction((u) => !document.querySelector(`#pending .inbox-item[data-uuid="${u}"]`), alpha.uuid);
  const other = page.locator(`#pending .inbox-item[data-conversation="${env.CONV_B}"]`);
  await other.locator('input.reason').fill('not during the freeze');
  await shot(page, 'inbox-deciding');
  await other.locator('button.reject').click();
  await page.waitForFunction(() => document.querySelectorAll('#pending .inbox-item').length === 1 &&
    document.querySelectorAll('#decided .history-item').length === 2);
  out.afterDecision = await entries(page);
  out.decided = await page.$$eval('#decided .history-item', (items) => items.map((li) => ({
    uuid: li.dataset.uuid, status: li.dataset.status, by: li.dataset.by, text: li.innerText,
  })));
  await shot(page, 'inbox-decided');

  step('a fourth approval, made meanwhile, appears');
  await checkpoint('fourth');
  await page.waitForFunction(([a, b]) => [...document.querySelectorAll('#pending .inbox-item')]
    .some((li) => li.dataset.conversation !== a && li.dataset.conversation !== b), [env.CONV_A, env.CONV_B]);
  const all = await entries(page);
  out.fourth = all.find((e) => e.conversation !== env.CONV_A && e.conversation !== env.CONV_B);
  out.reloaded = !(await page.evaluate(() => window.notReloaded === true));
  await shot(page, 'inbox-fourth-live');

  step('reject the rest at once');
  await page.locator('#select-all').check();
  await page.locator('#bulk-reason').fill('cleaning up');
  await page.locator('#bulk-reject').click();
  await page.waitForFunction(() => document.querySelectorAll('#pending .inbox-item').length === 0);
  await page.locator('#pending-empty').waitFor({ state: 'visible' });
  out.afterBulk = await page.locator('#pending .inbox-item').count();
  await shot(page, 'inbox-empty');
  await ctx.close();

  step('a user sees no inbox');
  const user = await signedIn(env.USER_TOKEN);
  await user.page.goto(`${env.BASE_URL}/`);
  await user.page.locator('#welcome').waitFor({ state: 'visible' });
  out.userNav = await user.page.locator('#nav-approvals').isVisible();
  await user.page.goto(`${env.BASE_URL}/#/approvals`);
  await user.page.locator('#ops-denied').waitFor({ state: 'visible' });
  out.userDenied = await user.page.locator('#ops-denied').textContent();
  await shot(user.page, 'inbox-user-refused');
  await user.ctx.close();
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
