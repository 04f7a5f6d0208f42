// browser.mjs: what the web page scripts (web-chat.mjs, web-group.mjs)
// share: Debian's Chromium launched headless through playwright-core, a
// step log on stderr, and screenshots kept as artifacts.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

// launchChromium starts the browser at executablePath headless, with the
// flags it needs in a container and without network chatter of its own.
export function launchChromium(executablePath, timeout) {
  return chromium.launch({
    executablePath,
    headless: true,
    timeout,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic'],
  });
}

// recorder returns step(name), which notes a step in out.steps and on
// stderr, and shot(page, name), which saves a screenshot in artifacts and
// notes its path in out.screenshots.
export function recorder(out, artifacts) {
  mkdirSync(artifacts, { recursive: true });
  return {
    step(name) {
      out.steps.push(name);
      console.error(`step: ${name}`);
    },
    async shot(page, name) {
      const path = join(artifacts, `${name}.png`);
      await page.screenshot({ path, animations: 'disabled', caret: 'hide' });
      out.screenshots.push(path);
    },
  };
}
