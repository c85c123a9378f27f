// Drives the daemon's web terminal in a real headless Chromium, as a person would:
// opens the page, sees the terminals list, opens a terminal, types a command, reads its output
// on the page, resizes the window, reloads and finds the scrollback again.
// Usage: node tests/web/web_terminal.mjs BASE_URL TOKEN SCREENSHOT.png ENV_TERMINAL_NAME
// Prints one JSON line with what it saw; exits non-zero (with a failure screenshot) on error.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [baseUrl, token, screenshotPath, envTerminalName] = process.argv.slice(2);
const TIMEOUT_MS = 15000;

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
  viewport: { width: 1100, height: 650 },
});
context.setDefaultTimeout(TIMEOUT_MS);
const page = context.pages()[0] ?? (await context.newPage());
const consoleErrors = [];
page.on('console', (message) => {
  if (message.type() === 'error') consoleErrors.push(message.text());
});
page.on('pageerror', (error) => consoleErrors.push(String(error)));
const failedRequests = [];
page.on('response', (response) => {
  if (response.status() >= 400) failedRequests.push(`${response.status()} ${response.url()}`);
});

const screenText = () => page.locator('.xterm-rows').innerText();

async function waitForScreen(needle) {
  await page.waitForFunction(
    (text) => document.querySelector('.xterm-rows')?.innerText.includes(text),
    needle,
  );
}

async function typeLine(text) {
  await page.locator('#terminal').click();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

async function termSize() {
  return page.evaluate(() => ({
    cols: window.execTerminal.term.cols,
    rows: window.execTerminal.term.rows,
  }));
}

const seen = {};
try {
  await page.goto(`${baseUrl}/?token=${encodeURIComponent(token)}`);
  seen.tokenLeftTheAddressBar = !page.url().includes('token=');

  // The list shows the environment.json terminal.
  await page.locator('#terminals button', { hasText: envTerminalName }).waitFor();

  // A new shell: type a command, see its output.
  await page.locator('#new-terminal').click();
  await page.locator('#status', { hasText: 'attached to' }).waitFor();
  // The shell's prompt (…/workspace# or $): it is ready for typing.
  await page.waitForFunction(() =>
    /workspace[#$]/.test(document.querySelector('.xterm-rows')?.innerText ?? ''),
  );
  seen.terminalId = await page.evaluate(() => window.execTerminal.state.id);
  await typeLine('echo hello-from-the-page-$((6*7))');
  await waitForScreen('hello-from-the-page-42');
  await page.screenshot({ path: screenshotPath });

  // Resizing the window resizes the PTY: the shell reports the page's size.
  const before = await termSize();
  await page.setViewportSize({ width: 760, height: 420 });
  await page.waitForFunction(
    (old) => window.execTerminal.term.cols !== old.cols,
    before,
  );
  const after = await termSize();
  await typeLine('stty size');
  await waitForScreen(`${after.rows} ${after.cols}`);
  seen.sizeBefore = before;
  seen.sizeAfter = after;

  // A reload reattaches to the same terminal and replays its scrollback.
  await page.reload();
  await page.locator('#status', { hasText: 'attached to' }).waitFor();
  await waitForScreen('hello-from-the-page-42');
  seen.reattachedTo = await page.evaluate(() => window.execTerminal.state.id);
  await typeLine('echo after-reload-$((2+3))');
  await waitForScreen('after-reload-5');
  await page.screenshot({ path: screenshotPath.replace(/\.png$/, '-reloaded.png') });

  // The environment.json terminal's output is there too.
  await page.locator('#terminals button', { hasText: envTerminalName }).click();
  await waitForScreen('greeting-from-environment-json');
  seen.consoleErrors = consoleErrors;
  seen.failedRequests = failedRequests;
  console.log(JSON.stringify({ ok: true, ...seen }));
} catch (error) {
  await page.screenshot({ path: screenshotPath.replace(/\.png$/, '-failure.png') }).catch(() => {});
  const text = await screenText().catch(() => '');
  console.log(
    JSON.stringify({ ok: false, error: String(error), screen: text, consoleErrors, failedRequests, ...seen }),
  );
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
