// Headless Debian chromium for the browser tests, in a throw-away profile.
// `const { context, page, close } = await launchChromium({ width, height })`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export async function launchChromium(viewport, timeoutMs) {
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'exec-daemon-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport,
  });
  context.setDefaultTimeout(timeoutMs);
  const page = context.pages()[0] ?? (await context.newPage());
  const close = async () => {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  };
  return { context, page, close };
}
