// web-chat.mjs drives the web chat page of a running mesh in headless
// Chromium (Debian's, through playwright-core, which never downloads a
// browser) as a person would, and prints what it saw as one JSON object on
// stdout. cmd/mesh/e2e/web_test.go runs it and asserts on the result.
//
// Environment: BASE_URL (http://host:port), CHROMIUM (the browser binary),
// ARTIFACTS (a directory for screenshots).
//
// At checkpoints the test acts on the mesh: "pause-elsewhere" and
// "decide-elsewhere" pause another conversation on an approval and decide
// it over REST, "kill-bridge" kills the mesh's bridge process (see
// checkpoint below); NO_CHECKPOINTS=1 skips that part when the script runs
// on its own.
//
// Every wait is for a DOM condition, bounded by TIMEOUT_MS; nothing sleeps.

import { createInterface } from 'node:readline';
import { launchChromium, recorder } from './browser.mjs';

const base = process.env.BASE_URL;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const artifacts = process.env.ARTIFACTS;
const timeout = Number(process.env.TIMEOUT_MS || 20000);
if (!base || !artifacts) {
  console.error('BASE_URL and ARTIFACTS are required');
  process.exit(2);
}

const out = { screenshots: [], consoleErrors: [], expectedNetworkErrors: [], steps: [] };
const { step, shot } = recorder(out, artifacts);

// checkpoint hands control to the Go test: it prints {"checkpoint": name}
// and waits for the test's "ok" on stdin.
const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function checkpoint(name) {
  process.stdout.write(`${JSON.stringify({ checkpoint: name })}\n`);
  const { value, done } = await stdinLines.next();
  if (done || value.trim() !== 'ok') throw new Error(`checkpoint ${name}: the test answered ${done ? 'nothing' : value}`);
}

// While the bridge is down, failed requests are expected.
let bridgeDown = false;
const browser = await launchChromium(executablePath, timeout);

// watch records console errors and uncaught exceptions of a page.
function watch(page) {
  page.setDefaultTimeout(timeout);
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = `${m.text()} @ ${m.location().url || ''}`;
    if (bridgeDown && /net::ERR_|Failed to load resource/.test(text)) out.expectedNetworkErrors.push(text);
    else out.consoleErrors.push(text);
  });
  page.on('pageerror', (e) => out.consoleErrors.push(`uncaught: ${e.message}`));
}

// lastReply is the text of the last assistant message that is not a notice,
// once it is complete.
const lastReply = (page) => page.evaluate(() => {
  const all = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')];
  const m = all[all.length - 1];
  return m ? { text: m.querySelector('.body').textContent, streaming: m.dataset.streaming, chunks: Number(m.dataset.chunks), source: m.dataset.source } : null;
});

// counts summarizes what the page shows.
const counts = (page) => page.evaluate(() => ({
  users: [...document.querySelectorAll('#messages li.msg.user')].map((e) => e.textContent),
  replies: document.querySelectorAll('#messages li.msg.assistant:not(.notice)').length,
  notices: document.querySelectorAll('#messages li.msg.assistant.notice').length,
  tools: [...document.querySelectorAll('#messages li.tool-call')].map((e) => `${e.dataset.name}:${e.dataset.status}`),
  approvalVisible: !document.querySelector('#approval').hidden,
  runStatus: document.querySelector('#run-status').dataset.status,
  activeConversation: document.querySelector('.conv-item.active .conv-title')?.textContent ?? null,
  conversationsListed: document.querySelectorAll('.conv-item').length,
  hash: location.hash,
}));

// patchCases are the examples of RFC 6902, appendix A (A.1–A.16), and an
// escaped pointer.
const patchCases = [
  { name: 'A.1', doc: { foo: 'bar' }, patch: [{ op: 'add', path: '/baz', value: 'qux' }], want: { baz: 'qux', foo: 'bar' } },
  { name: 'A.2', doc: { foo: ['bar', 'baz'] }, patch: [{ op: 'add', path: '/foo/1', value: 'qux' }], want: { foo: ['bar', 'qux', 'baz'] } },
  { name: 'A.3', doc: { baz: 'qux', foo: 'bar' }, patch: [{ op: 'remove', path: '/baz' }], want: { foo: 'bar' } },
  { name: 'A.4', doc: { foo: ['bar', 'qux', 'baz'] }, patch: [{ op: 'remove', path: '/foo/1' }], want: { foo: ['bar', 'baz'] } },
  { name: 'A.5', doc: { baz: 'qux', foo: 'bar' }, patch: [{ op: 'replace', path: '/baz', value: 'boo' }], want: { baz: 'boo', foo: 'bar' } },
  { name: 'A.6', doc: { foo: { bar: 'baz', waldo: 'fred' }, qux: { corge: 'grault' } }, patch: [{ op: 'move', from: '/foo/waldo', path: '/qux/thud' }], want: { foo: { bar: 'baz' }, qux: { corge: 'grault', thud: 'fred' } } },
  { name: 'A.7', doc: { foo: ['all', 'grass', 'cows', 'eat'] }, patch: [{ op: 'move', from: '/foo/1', path: '/foo/3' }], want: { foo: ['all', 'cows', 'eat', 'grass'] } },
  { name: 'A.8', doc: { baz: 'qux', foo: ['a', 2, 'c'] }, patch: [{ op: 'test', path: '/baz', value: 'qux' }, { op: 'test', path: '/foo/1', value: 2 }], want: { baz: 'qux', foo: ['a', 2, 'c'] } },
  { name: 'A.9', doc: { baz: 'qux' }, patch: [{ op: 'test', path: '/baz', value: 'bar' }], error: true },
  { name: 'A.10', doc: { foo: 'bar' }, patch: [{ op: 'add', path: '/child', value: { grandchild: {} } }], want: { foo: 'bar', child: { grandchild: {} } } },
  { name: 'A.11', doc: { foo: 'bar' }, patch: [{ op: 'add', path: '/baz', value: 'qux', xyz: 123 }], want: { foo: 'bar', baz: 'qux' } },
  { name: 'A.12', doc: { foo: 'bar' }, patch: [{ op: 'add', path: '/baz/bat', value: 'qux' }], error: true },
  { name: 'A.14', doc: { '/': 9, '~1': 10 }, patch: [{ op: 'test', path: '/~01', value: 10 }], want: { '/': 9, '~1': 10 } },
  { name: 'A.15', doc: { '/': 9, '~1': 10 }, patch: [{ op: 'test', path: '/~01', value: '10' }], error: true },
  { name: 'A.16', doc: { foo: ['bar'] }, patch: [{ op: 'add', path: '/foo/-', value: ['abc', 'def'] }], want: { foo: ['bar', ['abc', 'def']] } },
  { name: 'escaped', doc: { 'a/b': 1 }, patch: [{ op: 'replace', path: '/a~1b', value: 2 }, { op: 'copy', from: '/a~1b', path: '/c' }], want: { 'a/b': 2, c: 2 } },
  { name: 'root', doc: { a: 1 }, patch: [{ op: 'replace', path: '', value: { b: 2 } }], want: { b: 2 } },
];

try {
  // Desktop: a new conversation, a tool turn, an approval turn.
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await ctx.newPage();
  watch(page);
  step('open the page');
  await page.goto(`${base}/`);
  await page.locator('#welcome').waitFor({ state: 'visible' });
  await shot(page, 'desktop-empty');

  // The page applies STATE_DELTA with its own JSON Patch: check it against
  // the examples of RFC 6902, appendix A, in the page itself.
  step('JSON Patch');
  out.patchFailures = await page.evaluate(async (cases) => {
    const { applyPatch } = await import('/web/patch.js');
    const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x));
    const failures = [];
    for (const c of cases) {
      let got;
      try {
        got = canon(applyPatch(c.doc, c.patch));
      } catch (e) {
        got = 'error';
      }
      const want = c.error ? 'error' : canon(c.want);
      if (got !== want) failures.push(`${c.name}: got ${got}, want ${want}`);
    }
    return failures;
  }, patchCases);

  step('new conversation');
  await page.click('#new-conversation');
  await page.waitForFunction(() => location.hash.length > 1 && document.querySelector('#state-panel') && !document.querySelector('#state-panel').hidden);
  out.conversationId = await page.evaluate(() => location.hash.slice(1));
  await page.locator(`.conv-item.active[data-id="${out.conversationId}"]`).waitFor();

  step('send "list all resources"');
  await page.locator('#message-input').fill('list all resources');
  await page.locator('#message-input').press('Enter');
  await page.locator('.tool-call[data-name="resources_list"][data-status="success"]').waitFor();
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll('#messages li.msg.assistant:not(.notice)')].pop();
    return m && m.dataset.streaming === 'false' && document.querySelector('#run-status').dataset.status === 'idle' && !document.querySelector('#send').disabled;
  });
  out.listReply = await lastReply(page);
  // Each message says when it was written; Copy puts an answer's text on
  // the clipboard.
  out.times = await page.evaluate(() => [...document.querySelectorAll('#messages li.msg')].map((li) => ({
    iso: li.dataset.time ?? null, label: li.querySelector('.bubble').dataset.timeLabel ?? null,
    shown: getComputedStyle(li.querySelector('.bubble'), '::after').content,
  })));
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  await page.locator('#messages li.msg.assistant:not(.notice)').last().locator('button.copy').click();
  await page.locator('#messages li.msg.assistant:not(.notice)').last().locator('button.copy[data-copied="true"]').waitFor();
  out.copied = await page.evaluate(() => navigator.clipboard.readText());
  out.listToolResult = await page.locator('.tool-call[data-name="resources_list"] .tool-result').textContent();
  await shot(page, 'desktop-list');

  step('send "add resource web-1 with value 7"');
  await page.locator('#message-input').fill('add resource web-1 with value 7');
  await page.click('#send');
  await page.locator('#approval button.approve').waitFor({ state: 'visible' });
  await page.locator('.tool-call[data-name="resources_add"][data-status="pending"][data-approval="pending"]').waitFor();
  await page.waitForFunction(() => document.querySelector('#run-status').dataset.status === 'waiting_approval');
  out.approvalText = await page.locator('#approval').innerText();
  out.sendDisabledWhileWaiting = await page.locator('#send').isDisabled();
  await shot(page, 'desktop-approval');

  step('approve');
  await page.click('#approval button.approve');
  await page.locator('#approval').waitFor({ state: 'hidden' });
  await page.locator('.tool-call[data-name="resources_add"][data-status="success"]').waitFor();
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll('#messages li')].pop();
    return m && m.matches('.msg.assistant:not(.notice)') && m.dataset.streaming === 'false' &&
      m.textContent.includes('web-1') && document.querySelector('#run-status').dataset.status === 'idle';
  });
  // The approval request is marked a notice when the page re-reads the
  // conversation after the run (the event stream does not flag notices).
  await page.locator('#messages li.msg.assistant.notice').first().waitFor();
  out.addReply = await lastReply(page);
  out.addToolResult = await page.locator('.tool-call[data-name="resources_add"] .tool-result').textContent();
  await page.locator('.tool-call[data-name="resources_add"] summary').click();
  out.afterApproval = await counts(page);
  await shot(page, 'desktop-approved');

  step('reload');
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('#messages li.tool-call[data-status="success"]').length === 2 &&
    document.querySelectorAll('#messages li.msg.user').length === 2);
  await page.locator('.conv-item.active').waitFor();
  // The event replay that follows the history must add nothing: wait for the
  // stream to be open and caught up (the run status comes from it too).
  await page.waitForFunction(() => document.querySelector('#connection').hidden && document.querySelector('#run-status').dataset.status === 'idle');
  out.afterReload = await counts(page);
  await shot(page, 'desktop-reload');

  if (!process.env.NO_CHECKPOINTS) {
    step('a conversation paused and decided elsewhere: the list follows');
    // At "pause-elsewhere" the test pauses another conversation on an
    // approval over REST; at "decide-elsewhere" it starts deciding it. The
    // page, open on its own conversation, is told nothing but its list.
    await checkpoint('pause-elsewhere');
    await page.locator('.conv-item[data-status="waiting_approval"]').waitFor();
    out.listedElsewhere = await page.locator('.conv-item[data-status="waiting_approval"]').count();
    await shot(page, 'desktop-paused-elsewhere');
    await checkpoint('decide-elsewhere');
    const decidedAt = Date.now();
    await page.waitForFunction(() => !document.querySelector('.conv-item[data-status="waiting_approval"]'));
    out.decidedElsewhereMs = Date.now() - decidedAt;

    step('the bridge dies');
    // Every text the connection indicator shows while the bridge is away.
    await page.evaluate(() => {
      const el = document.querySelector('#connection');
      window.__connectionTexts = [];
      new MutationObserver(() => {
        const texts = window.__connectionTexts;
        if (!el.hidden && el.textContent && texts[texts.length - 1] !== el.textContent) texts.push(el.textContent);
      }).observe(el, { attributes: true, childList: true, characterData: true, subtree: true });
    });
    bridgeDown = true;
    await checkpoint('kill-bridge');
    await page.locator('#connection').waitFor({ state: 'visible' });
    out.reconnecting = await page.locator('#connection').textContent();
    await shot(page, 'desktop-reconnecting');
    step('the bridge is back');
    // The page follows the stream again after its last event.
    await page.locator('#connection').waitFor({ state: 'hidden', timeout: 60000 });
    bridgeDown = false;
    out.reconnectTexts = await page.evaluate(() => window.__connectionTexts);
    out.retryDelays = await page.evaluate(async () => {
      const { retryDelay } = await import('/web/backoff.js');
      return [0, 1, 2, 3, 4, 5, 6, 20].map(retryDelay);
    });
    await page.locator('#message-input').fill('list all resources');
    await page.locator('#message-input').press('Enter');
    await page.waitForFunction(() => {
      const items = [...document.querySelectorAll('#messages li')];
      const last = items[items.length - 1];
      return document.querySelectorAll('#messages li.tool-call[data-status="success"]').length >= 3 &&
        last.matches('.msg.assistant:not(.notice)') && last.dataset.streaming === 'false' &&
        document.querySelector('#run-status').dataset.status === 'idle';
    });
    out.afterReconnect = await counts(page);
  }
  await ctx.close();

  // Phone width: the same conversation, then the conversation list.
  step('phone');
  const phone = await browser.newContext({ viewport: { width: 375, height: 760 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const pp = await phone.newPage();
  watch(pp);
  await pp.goto(`${base}/#${out.conversationId}`);
  const tools = (out.afterReconnect || out.afterReload).tools.length;
  await pp.waitForFunction((n) => document.querySelectorAll('#messages li.tool-call[data-status="success"]').length === n, tools);
  out.phone = await pp.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    sidebarVisible: document.querySelector('#sidebar').getBoundingClientRect().right > 0,
    composerVisible: document.querySelector('#message-input').getBoundingClientRect().bottom <= window.innerHeight,
  }));
  await shot(pp, 'phone-chat');
  await pp.click('#menu-toggle');
  await pp.waitForFunction(() => {
    const r = document.querySelector('#sidebar').getBoundingClientRect();
    return r.left >= 0 && document.querySelector('#app').classList.contains('sidebar-open');
  });
  await pp.locator('.conv-item.active').waitFor({ state: 'visible' });
  await shot(pp, 'phone-menu');
  await pp.click('#sidebar-close');
  await phone.close();
  step('done');
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  await browser.close();
  stdinLines.return?.();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(out.error ? 1 : 0);
