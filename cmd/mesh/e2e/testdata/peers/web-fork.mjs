// web-fork.mjs drives the branches of the web chat page in headless
// Chromium (Debian's, through playwright-core) as a person would: two
// messages ("hello", then "list all resources"), Edit on the second, a
// new text sent (the page moves to the branch, whose answer streams in),
// the arrows on the edited message back to the original (its own answer
// still there) and, by keyboard, to the branch again, a reload that stays
// on the branch, the header's branch list, and an edit of the edited
// message (a third branch at the same point). It prints what the page
// showed as one JSON object on stdout; cmd/mesh/e2e/web_fork_test.go runs
// it and asserts on the result.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots), TIMEOUT_MS, EDITED (the new
// text of the second message).
//
// Every wait is for a DOM condition, bounded by TIMEOUT_MS; nothing sleeps.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
const edited = process.env.EDITED || 'help';
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, artifacts);
const browser = await launchChromium(executablePath, timeout);

// view sums up what the page shows: the address, the user messages (their
// text and the branch arrows on them), the answers, the tool calls and
// the header's branch summary.
const view = (page) => page.evaluate(() => ({
  hash: location.hash.slice(1),
  users: [...document.querySelectorAll('#messages li.msg.user')].map((li) => ({
    id: li.dataset.id || '',
    text: li.querySelector('.bubble').textContent,
    branch: li.dataset.branch || '',
    navLabel: li.querySelector('.branch-nav')?.getAttribute('aria-label') || '',
    navVisible: !!li.querySelector('.branch-nav') && !li.querySelector('.branch-nav').hidden,
    editLabel: li.querySelector('button.edit')?.getAttribute('aria-label') || '',
  })),
  answers: [...document.querySelectorAll('#messages li.msg.assistant:not(.notice) .body')].map((b) => b.textContent),
  tools: [...document.querySelectorAll('#messages li.tool-call')].map((c) => `${c.dataset.name}:${c.dataset.status}`),
  branches: document.querySelector('#branches').hidden ? '' : document.querySelector('#branches-summary').textContent,
  runStatus: document.querySelector('#run-status').dataset.status,
  focused: document.activeElement ? (document.activeElement.getAttribute('aria-label') || document.activeElement.textContent) : '',
}));

// settled waits until the page shows conversation id idle with n answers,
// the last complete, and (when arrows is set) the branch arrows on the
// second user message saying arrows ("2/2").
const settled = (page, id, n, arrows) => page.waitForFunction(([id, n, arrows]) => {
  const all = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')];
  const users = [...document.querySelectorAll('#messages li.msg.user')];
  return location.hash.slice(1) === id && all.length === n && all[n - 1].dataset.streaming === 'false' &&
    document.querySelector('#run-status').dataset.status === 'idle' &&
    (!arrows || (users[1] && users[1].dataset.branch === arrows));
}, [id, n, arrows]);

let page;
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(`${m.text()} @ ${m.location().url || ''}`);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));

  step('open the page and send "hello"');
  await page.goto(`${base}/`);
  await page.locator('#welcome').waitFor({ state: 'visible' });
  await page.locator('#message-input').fill('hello');
  await page.locator('#message-input').press('Enter');
  await page.waitForFunction(() => location.hash.length > 1);
  out.original = await page.evaluate(() => location.hash.slice(1));
  await settled(page, out.original, 1);

  step('send "list all resources"');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await settled(page, out.original, 2);
  await page.waitForFunction(() => [...document.querySelectorAll('#messages li.msg.user')].every((li) => li.dataset.id));
  out.before = await view(page);

  step('edit the second message, then Escape: nothing changes');
  const second = page.locator('#messages li.msg.user').nth(1);
  await second.locator('button.edit').click();
  await second.locator('textarea.edit-input').waitFor();
  out.editorText = await second.locator('textarea.edit-input').inputValue();
  await second.locator('textarea.edit-input').press('Escape');
  await second.locator('textarea.edit-input').waitFor({ state: 'detached' });
  out.afterEscape = await view(page);

  step(`edit the second message to "${edited}" and send`);
  await second.locator('button.edit').click();
  await second.locator('textarea.edit-input').fill(edited);
  await shot(page, 'editing');
  await second.locator('button.send-edit').click();
  await page.waitForFunction((o) => location.hash.length > 1 && location.hash.slice(1) !== o, out.original);
  out.branch = await page.evaluate(() => location.hash.slice(1));
  await settled(page, out.branch, 2, '2/2');
  out.onBranch = await view(page);
  await shot(page, 'branch');

  step('previous branch: the original, with its own answer');
  await page.locator('#messages li.msg.user').nth(1).locator('button.branch-prev').click();
  await settled(page, out.original, 2, '1/2');
  out.backOnOriginal = await view(page);
  await shot(page, 'original');

  step('next branch, by keyboard: the arrow keeps the focus');
  await page.waitForFunction(() => document.activeElement && document.activeElement.classList.contains('branch-next'));
  await page.keyboard.press('Enter');
  await settled(page, out.branch, 2, '2/2');
  out.againOnBranch = await view(page);

  step('reload: the address keeps the branch');
  await page.reload();
  await settled(page, out.branch, 2, '2/2');
  out.afterReload = await view(page);

  step('the header lists the branches: the original from there');
  await page.locator('#branches-summary').click();
  out.branchList = await page.locator('#branches-list .branch-item').evaluateAll((items) => items.map((b) => ({
    id: b.dataset.id, current: b.getAttribute('aria-current') === 'page', text: b.textContent,
  })));
  await shot(page, 'branch-list');
  await page.locator(`#branches-list .branch-item[data-id="${out.original}"]`).click();
  await settled(page, out.original, 2, '1/2');
  out.fromList = await view(page);

  step('on the branch, edit the edited message again: a third branch at the same point');
  await page.locator('#messages li.msg.user').nth(1).locator('button.branch-next').click();
  await settled(page, out.branch, 2, '2/2');
  const again = page.locator('#messages li.msg.user').nth(1);
  await again.locator('button.edit').click();
  await again.locator('textarea.edit-input').fill('hello');
  await again.locator('textarea.edit-input').press('Enter');
  await page.waitForFunction((known) => location.hash.length > 1 && !known.includes(location.hash.slice(1)), [out.original, out.branch]);
  out.third = await page.evaluate(() => location.hash.slice(1));
  await settled(page, out.third, 2, '3/3');
  out.onThird = await view(page);
  await shot(page, 'third');
  step('previous branch from the third: the second, now 2 of 3');
  await page.locator('#messages li.msg.user').nth(1).locator('button.branch-prev').click();
  await settled(page, out.branch, 2, '2/3');
  out.secondOfThree = await view(page);
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
  // What the page showed when it did not do what was expected.
  try {
    out.atError = await view(page);
    await shot(page, 'at-error');
  } catch {
    // the page itself is gone
  }
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
