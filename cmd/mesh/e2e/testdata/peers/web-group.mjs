// web-group.mjs drives the web chat page of a running mesh that has a group
// chat in headless Chromium (Debian's, through playwright-core) as a person
// would, and prints what it saw as one JSON object on stdout.
// cmd/mesh/e2e/web_group_test.go runs it and asserts on the result.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots), GROUP (the group to chat with),
// TIMEOUT_MS.
//
// A round of a group chat with the offline model lasts milliseconds, too
// short to catch the "who is speaking" indicator by looking at it: a
// MutationObserver in the page records every state it showed.
//
// Every wait is for a DOM condition, bounded by TIMEOUT_MS; nothing sleeps.

import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const group = process.env.GROUP || 'team';
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const out = { screenshots: [], consoleErrors: [], steps: [] };
const { step, shot } = recorder(out, artifacts);

const browser = await launchChromium(executablePath, timeout);

function watch(page) {
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() === 'error') out.consoleErrors.push(`${m.text()} @ ${m.location().url || ''}`);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
}

// record starts noting, in the page, every state of the speaking indicator
// (#speaking) and of the run status while it was not idle.
const record = (page) => page.evaluate(() => {
  window.seen = { speaking: [], runStatus: [] };
  const note = (list, entry) => {
    const last = list[list.length - 1];
    if (!last || JSON.stringify(last) !== JSON.stringify(entry)) list.push(entry);
  };
  const speaking = document.querySelector('#speaking');
  new MutationObserver(() => {
    if (speaking.hidden || !speaking.textContent) return;
    note(window.seen.speaking, {
      speaker: speaking.dataset.speaker || '',
      text: speaking.querySelector('.speaking-text')?.textContent ?? speaking.textContent,
      role: speaking.getAttribute('role') || '',
      live: speaking.getAttribute('aria-live') || '',
    });
  }).observe(speaking, { attributes: true, childList: true, subtree: true, characterData: true });
  const status = document.querySelector('#run-status');
  new MutationObserver(() => {
    if (status.dataset.status !== 'idle') note(window.seen.runStatus, status.textContent);
  }).observe(status, { attributes: true, childList: true, subtree: true, characterData: true });
});

// roundDone: n member answers complete, the end of the round shown, idle.
const roundDone = (page, n) => page.waitForFunction((want) => {
  const replies = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')];
  return replies.length === want && replies.every((m) => m.dataset.streaming === 'false') &&
    document.querySelector('#messages li.group-event.ended') &&
    document.querySelector('#run-status').dataset.status === 'idle' && !document.querySelector('#send').disabled;
}, n);

// chat sums up what a group chat shows.
const chat = (page) => page.evaluate(() => ({
  replies: [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].map((m) => ({
    author: m.querySelector('.author')?.textContent ?? '',
    dataAuthor: m.dataset.author ?? '',
    avatar: m.querySelector('.avatar')?.textContent ?? '',
    text: m.querySelector('.body').textContent,
    source: m.dataset.source,
    chunks: Number(m.dataset.chunks),
  })),
  tools: [...document.querySelectorAll('#messages li.tool-call')].map((e) =>
    `${e.querySelector('.tool-author')?.textContent ?? ''}:${e.dataset.name}:${e.dataset.status}`),
  ended: [...document.querySelectorAll('#messages li.group-event.ended')].map((e) => ({ reason: e.dataset.reason, text: e.textContent })),
  skipped: document.querySelectorAll('#messages li.group-event.skipped').length,
  // The order of the log: u(ser), a(nswer), t(ool), e(nded), s(kipped).
  order: [...document.querySelectorAll('#messages li')].map((e) => (e.matches('.msg.user') ? 'u' : e.matches('.msg') ? 'a'
    : e.matches('.tool-call') ? 't' : e.matches('.ended') ? 'e' : e.matches('.skipped') ? 's' : '?')).join(''),
  speakingVisible: !document.querySelector('#speaking').hidden,
  runStatus: document.querySelector('#run-status').dataset.status,
  meta: document.querySelector('#conversation-meta').textContent,
  hash: location.hash,
}));

try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  watch(page);

  step('open the page');
  await page.goto(`${base}/`);
  await page.locator('#target').waitFor({ state: 'visible' });
  await page.locator(`#new-target option[value="${group}"]`).waitFor({ state: 'attached' });
  out.options = await page.locator('#new-target option').allTextContents();
  out.defaultTarget = await page.locator('#new-target').inputValue();
  out.targetLabel = await page.evaluate(() => document.querySelector('#new-target').labels[0]?.textContent ?? '');

  step('choose the agent alice');
  await page.locator('#new-target').selectOption('agent:alice');
  out.agentPick = {
    welcomeTitle: await page.locator('#welcome-title').textContent(),
    targetHint: await page.locator('#target-hint').textContent(),
    placeholder: await page.locator('#message-input').getAttribute('placeholder'),
  };
  await shot(page, 'agent-picked');

  step(`choose the group ${group}`);
  await page.locator('#new-target').selectOption(group);
  out.welcomeTitle = await page.locator('#welcome-title').textContent();
  out.targetHint = await page.locator('#target-hint').textContent();
  await shot(page, 'group-welcome');

  step('new conversation');
  await page.click('#new-conversation');
  await page.waitForFunction((g) => location.hash.length > 1 && document.querySelector('#conversation-meta').textContent.startsWith(`group ${g}`), group);
  out.conversationId = await page.evaluate(() => location.hash.slice(1));
  await page.locator(`.conv-item.active[data-id="${out.conversationId}"]`).waitFor();
  out.listedAs = await page.locator(`.conv-item[data-id="${out.conversationId}"] .conv-group`).textContent();
  // The stream is open: no event of the round can be missed.
  await page.waitForFunction(() => document.querySelector('#connection').hidden);
  out.placeholder = await page.locator('#message-input').getAttribute('placeholder');
  await record(page);

  step('send "list all resources"');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await roundDone(page, 3);
  out.live = await chat(page);
  out.seen = await page.evaluate(() => window.seen);
  await shot(page, 'group-round');

  step('reload');
  await page.reload();
  await roundDone(page, 3);
  // The replayed events must add nothing: wait for the stream to be caught up.
  await page.waitForFunction(() => document.querySelector('#connection').hidden && document.querySelector('#run-status').dataset.status === 'idle' &&
    document.querySelector('#messages li.group-event.ended').dataset.detail !== '');
  out.reloaded = await chat(page);
  await shot(page, 'group-reload');
  await ctx.close();

  step(`?group=${group}`);
  const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const p2 = await ctx2.newPage();
  watch(p2);
  await p2.goto(`${base}/?group=${encodeURIComponent(group)}`);
  await p2.waitForFunction((g) => document.querySelector('#new-target').value === g, group);
  out.fromURL = { welcomeTitle: await p2.locator('#welcome-title').textContent() };
  await p2.locator('#message-input').fill('list all resources');
  await p2.locator('#message-input').press('Enter');
  await roundDone(p2, 3);
  out.fromURL.chat = await chat(p2);
  out.fromURL.conversationId = await p2.evaluate(() => location.hash.slice(1));
  await shot(p2, 'group-from-url');
  await ctx2.close();
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
