// web-actions.mjs drives the user actions of the web chat page in headless
// Chromium (Debian's, through playwright-core) as a person would: like an
// answer, regenerate it, dislike the new one, reload; and prints what the
// page showed as one JSON object on stdout. cmd/mesh/e2e/actions_test.go
// runs it and asserts on the result.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots), TIMEOUT_MS.
//
// Every wait is for a DOM condition, bounded by TIMEOUT_MS; nothing sleeps.

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

// answers sums up the answers the page shows, oldest first.
const answers = (page) => page.evaluate(() => ({
  answers: [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].map((li) => ({
    id: li.dataset.id,
    superseded: li.classList.contains('superseded'),
    opacity: getComputedStyle(li).opacity,
    like: li.querySelector('button.feedback.like')?.getAttribute('aria-pressed') ?? '',
    dislike: li.querySelector('button.feedback.dislike')?.getAttribute('aria-pressed') ?? '',
    regenerate: !!li.querySelector('button.regenerate') && !li.querySelector('button.regenerate').hidden
      && getComputedStyle(li.querySelector('button.regenerate')).display !== 'none',
  })),
  supersededTools: document.querySelectorAll('#messages li.tool-call.superseded').length,
  users: document.querySelectorAll('#messages li.msg.user').length,
  runStatus: document.querySelector('#run-status').dataset.status,
}));

// settled waits until the run ended and n answers show, the last complete.
const settled = (page, n) => page.waitForFunction((n) => {
  const all = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')];
  return all.length === n && all[n - 1].dataset.streaming === 'false' && document.querySelector('#run-status').dataset.status === 'idle';
}, n);

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(`${m.text()} @ ${m.location().url || ''}`);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));

  step('open the page and send "list all resources"');
  await page.goto(`${base}/`);
  await page.locator('#welcome').waitFor({ state: 'visible' });
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await settled(page, 1);
  out.conversationId = await page.evaluate(() => location.hash.slice(1));

  step('like the answer');
  await page.locator('#messages li.msg.assistant:not(.notice) button.feedback.like').click();
  await page.locator('#messages li.msg.assistant:not(.notice) button.feedback.like[aria-pressed="true"]').waitFor();
  out.before = await answers(page);
  await shot(page, 'liked');

  step('regenerate');
  await page.locator('#messages li.msg.assistant:not(.notice) button.regenerate:visible').click();
  await settled(page, 2);
  // The read after the run confirms the old answer as superseded.
  await page.waitForFunction(() => {
    const all = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')];
    return all[0].classList.contains('superseded') && !all[1].querySelector('button.regenerate').hidden;
  });
  step('dislike the new answer');
  const fresh = page.locator('#messages li.msg.assistant:not(.notice):not(.superseded)').last();
  out.answer = await fresh.getAttribute('data-id');
  await fresh.locator('button.feedback.dislike').click();
  await fresh.locator('button.feedback.dislike[aria-pressed="true"]').waitFor();
  out.after = await answers(page);
  await shot(page, 'regenerated');

  step('reload');
  await page.reload();
  await settled(page, 2);
  await page.waitForFunction(() => document.querySelectorAll('#messages li.msg.superseded').length > 0
    && document.querySelector('#messages button.feedback[aria-pressed="true"]'));
  out.reloaded = await answers(page);
  await shot(page, 'reloaded');
  await ctx.close();
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
}
await browser.close();
console.log(JSON.stringify(out));
process.exit(0);
