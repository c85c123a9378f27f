// Drives the daemon's web terminal in a real headless Chromium, as a person would, through a
// TCP proxy of its own (so the test can cut the connection like a network would):
// first load opens a shell; typing, OSC title, rename, paste, copy on select, links, find,
// theme and font size kept over a reload; a second browser tab without the token and its size;
// an environment.json terminal shared with the agent (tmux); a dropped connection; a daemon
// restart (the Python side restarts it when this script prints {"restart": true}).
// Usage: node tests/web/web_terminal.mjs PTY_URL TOKEN SCREENSHOT_DIR ENV_TERMINAL_NAME
// Prints JSON lines; the last one says what it saw; exits non-zero (with a failure screenshot).
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { launchChromium } from './chromium.mjs';

const [daemonUrl, token, screenshotDir, envTerminalName] = process.argv.slice(2);
// A cap on a step that never happens: a page on a busy 2-core machine took over 15 s.
const TIMEOUT_MS = 45000;
const input = readline.createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();

// -- a proxy that can drop every connection, as a flaky network does --------------------------
const target = new URL(daemonUrl);
const open = new Set();
let refusing = false;
const proxy = net.createServer((client) => {
  if (refusing) {
    client.destroy();
    return;
  }
  const upstream = net.connect(Number(target.port), target.hostname);
  const pair = [client, upstream];
  open.add(pair);
  const end = () => {
    client.destroy();
    upstream.destroy();
    open.delete(pair);
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
  client.pipe(upstream);
  upstream.pipe(client);
});
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const baseUrl = `http://127.0.0.1:${proxy.address().port}`;
function cutConnections() {
  refusing = true;
  for (const [client, upstream] of open) {
    client.destroy();
    upstream.destroy();
  }
  open.clear();
}

const { context, page, close } = await launchChromium({ width: 1100, height: 650 }, TIMEOUT_MS);
await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl });
const consoleErrors = [];
page.on('console', (message) => {
  // Chromium reports each refused reconnection attempt and each failed list request; those
  // are expected while the connection is cut or the daemon restarts.
  const text = message.text();
  if (message.type() === 'error' && !text.includes('WebSocket connection to') && !text.includes('net::ERR_')) {
    consoleErrors.push(text);
  }
});
page.on('pageerror', (error) => consoleErrors.push(String(error)));

const shot = (name, which = page) => which.screenshot({ path: path.join(screenshotDir, `${name}.png`) });
const bufferText = (which = page) =>
  which.evaluate(() => {
    const buffer = window.execTerminal.term.buffer.active;
    const rows = [];
    for (let i = 0; i < buffer.length; i++) rows.push(buffer.getLine(i).translateToString(true));
    return rows.join('\n');
  });

async function waitForText(needle, which = page) {
  await which.waitForFunction((text) => {
    const buffer = window.execTerminal.term.buffer.active;
    for (let i = 0; i < buffer.length; i++) {
      if (buffer.getLine(i).translateToString(true).includes(text)) return true;
    }
    return false;
  }, needle);
}

async function typeLine(text, which = page) {
  await which.locator('.xterm-helper-textarea').focus();
  await which.keyboard.type(text);
  await which.keyboard.press('Enter');
}

const termState = (which = page) =>
  which.evaluate(() => ({
    id: window.execTerminal.state.id,
    online: window.execTerminal.state.online,
    cols: window.execTerminal.term.cols,
    rows: window.execTerminal.term.rows,
    fontSize: window.execTerminal.term.options.fontSize,
  }));

async function waitOnline(which = page) {
  await which.waitForFunction(() => window.execTerminal.state.online);
}

async function prompt(which = page) {
  await which.waitForFunction(() => {
    const buffer = window.execTerminal.term.buffer.active;
    for (let i = 0; i < buffer.length; i++) {
      if (/workspace[#$]/.test(buffer.getLine(i).translateToString(true))) return true;
    }
    return false;
  });
}

// The page coordinates of the cell where `needle` starts on the screen.
async function cellOf(needle, which = page) {
  return which.evaluate((text) => {
    const term = window.execTerminal.term;
    const buffer = term.buffer.active;
    const screen = document.querySelector('.xterm-screen').getBoundingClientRect();
    const cellWidth = screen.width / term.cols;
    const cellHeight = screen.height / term.rows;
    for (let row = 0; row < term.rows; row++) {
      const line = buffer.getLine(buffer.viewportY + row).translateToString(true);
      const col = line.indexOf(text);
      if (col >= 0) {
        return { x: screen.left + (col + 0.5) * cellWidth, y: screen.top + (row + 0.5) * cellHeight, cellWidth };
      }
    }
    return null;
  }, needle);
}

function listTerminals() {
  return fetch(`${daemonUrl}/terminals`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.json());
}

const seen = {};
try {
  // First load: the token leaves the address bar, a shell opens by itself.
  await page.goto(`${baseUrl}/?token=${encodeURIComponent(token)}`);
  seen.tokenLeftTheAddressBar = !page.url().includes('token=');
  await waitOnline();
  await prompt();
  seen.firstLoadOpenedAShell = (await termState()).id !== null;
  seen.tokenStoredIn = await page.evaluate(() => (localStorage.getItem('exec-daemon-token') ? 'localStorage' : 'nowhere'));
  const firstId = (await termState()).id;
  await typeLine('echo hello-from-the-page-$((6*7))');
  await waitForText('hello-from-the-page-42');

  // OSC 0 sets the tab's and the page's title (through tmux).
  await typeLine("printf '\\033]0;osc-title-%s\\007' $((40+2))");
  await page.waitForFunction(() => document.title.includes('osc-title-42'));
  await page.locator('.tab.current .label', { hasText: 'osc-title-42' }).waitFor();
  seen.titleFromOsc = await page.title();

  // Rename the tab (double-click), then the name wins over the program's title.
  await page.locator('.tab.current .label').dblclick();
  await page.locator('.tab input').fill('my build');
  await page.locator('.tab input').press('Enter');
  await page.locator('.tab.current .label', { hasText: 'my build' }).waitFor();
  seen.renamedInListing = (await listTerminals()).find((t) => t.id === firstId)?.name;

  // Ctrl+V pastes the clipboard (not ^V).
  await page.evaluate(() => navigator.clipboard.writeText('echo pasted-$((5*5))'));
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.press('Control+V');
  await page.keyboard.press('Enter');
  await waitForText('pasted-25');
  seen.pasted = true;

  // Selecting with the mouse copies to the clipboard.
  await page.evaluate(() => navigator.clipboard.writeText('nothing yet'));
  const word = await cellOf('hello-from-the-page-42');
  await page.mouse.move(word.x - word.cellWidth / 2 + 1, word.y);
  await page.mouse.down();
  const wordEnd = word.x + word.cellWidth * ('hello-from-the-page-42'.length - 0.5) - 1;
  await page.mouse.move(wordEnd, word.y, { steps: 5 });
  await page.mouse.up();
  seen.copiedOnSelect = await page.evaluate(() => navigator.clipboard.readText());
  // Ctrl+C with a selection copies and sends nothing; Ctrl+Shift+C is not taken (inspector).
  await page.keyboard.press('Control+C');
  seen.selectionClearedByCopy = await page.evaluate(() => !window.execTerminal.term.hasSelection());

  // A URL on the screen is a link: hovering and clicking it opens a new tab there.
  const linkUrl = `${baseUrl}/terminals?from=link`;
  await typeLine(`clear; echo ${linkUrl}`);
  await waitForText(`${linkUrl}`);
  await page.waitForFunction((url) => {
    const buffer = window.execTerminal.term.buffer.active;
    for (let row = 0; row < window.execTerminal.term.rows; row++) {
      if (buffer.getLine(buffer.viewportY + row).translateToString(true).startsWith(url)) return true;
    }
    return false;
  }, linkUrl);
  const link = await cellOf(linkUrl);
  await page.mouse.move(link.x + link.cellWidth * 3, link.y);
  await page.mouse.move(link.x + link.cellWidth * 5, link.y);
  const popupPromise = context.waitForEvent('page');
  await page.mouse.click(link.x + link.cellWidth * 5, link.y);
  const popup = await popupPromise;
  await popup.waitForURL(/from=link/);
  seen.linkOpened = popup.url();
  await popup.close();

  // Find: Ctrl+Shift+F, type, Enter selects the match.
  await typeLine('echo needle-$((3*3))-in-a-haystack');
  await waitForText('needle-9-in-a-haystack');
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.press('Control+Shift+F');
  await page.locator('#find-text').fill('needle-9');
  await page.locator('#find-text').press('Enter');
  await page.waitForFunction(() => window.execTerminal.term.getSelection() === 'needle-9');
  seen.findSelected = await page.evaluate(() => window.execTerminal.term.getSelection());
  seen.findCount = await page.locator('#find-count').innerText();
  await shot('find');
  await page.locator('#find-text').press('Escape');

  // Theme and font size survive a reload, which reattaches to the same terminal.
  await page.locator('#theme').click();
  await page.locator('#font-larger').click();
  await page.locator('#font-larger').click();
  await page.reload();
  await waitOnline();
  await waitForText('needle-9-in-a-haystack');
  seen.afterReload = await termState();
  seen.lightThemeKept = await page.evaluate(() => document.body.classList.contains('light'));
  await shot('light-theme');
  await page.locator('#theme').click();

  // A second browser tab: no token asked (no login form); a small window shrinks the terminal
  // for both viewers; closing it gives the big window its size back.
  const bigSize = await termState();
  const second = await context.newPage();
  await second.setViewportSize({ width: 640, height: 360 });
  await second.goto(`${baseUrl}/#${firstId}`);
  await waitOnline(second);
  seen.secondTabAskedForToken = await second.locator('#login').isVisible();
  seen.secondTabTerminal = (await termState(second)).id;
  const smallSize = await termState(second);
  await page.waitForFunction((cols) => window.execTerminal.term.cols === cols, smallSize.cols);
  seen.sizes = { big: bigSize, small: smallSize, bigWhileSmallAttached: await termState() };
  await typeLine('stty size', second);
  await waitForText(`${smallSize.rows} ${smallSize.cols}`, second);
  await shot('two-viewers-big');
  await second.close();
  await page.waitForFunction((cols) => window.execTerminal.term.cols === cols, bigSize.cols);
  seen.sizes.bigAfterSmallLeft = await termState();

  // The environment.json terminal runs in tmux: a person watches it live ...
  await page.locator('.tab .label', { hasText: envTerminalName }).click();
  await waitOnline();
  await waitForText('watching-for-changes');
  const envInfo = (await listTerminals()).find((t) => t.name === envTerminalName);
  const tick = async () => Number((await bufferText()).match(/tick-(\d+)/g)?.pop()?.slice(5) ?? 0);
  const firstTick = await tick();
  await waitForText(`tick-${firstTick + 2}`);
  seen.liveTicks = [firstTick, firstTick + 2];
  // ... the agent types into it with tmux, and the person sees it ...
  execFileSync('bash', ['-c', envInfo.shared.type_keys.replace("'echo hello'", "'src/app.ts'")]);
  await waitForText('rebuilt after src/app.ts');
  // ... and what the person types, the agent reads.
  await typeLine('from-the-person');
  await waitForText('rebuilt after from-the-person');
  seen.agentScreen = execFileSync('bash', ['-c', envInfo.shared.read_screen]).toString();
  await shot('shared-terminal');

  // A dropped connection: a visible overlay, input paused; then it resumes where it was.
  cutConnections();
  await page.locator('#overlay').waitFor({ state: 'visible' });
  seen.inputPausedOffline = await page.evaluate(() => window.execTerminal.term.options.disableStdin);
  await page.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type('lost-while-offline');
  await shot('offline');
  const tickOffline = await tick();
  // Output continues while the page is offline; let a few ticks pass, then reconnect.
  const until = Date.now() + 1500;
  while (Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
  refusing = false;
  await page.locator('#overlay').waitFor({ state: 'hidden' });
  await waitOnline();
  await waitForText(`tick-${tickOffline + 4}`);
  const ticks = (await bufferText()).match(/tick-(\d+)/g).map((t) => Number(t.slice(5)));
  seen.ticksAfterReconnect = { tickOffline, ticks };
  seen.offlineTypingReachedTheProgram = (await bufferText()).includes('lost-while-offline');

  // The + button opens a shell; its tab's × ends it and the page shows another terminal.
  const shown = (await termState()).id;
  await page.locator('#new-terminal').click();
  await page.waitForFunction((old) => window.execTerminal.state.online && window.execTerminal.state.id !== old, shown);
  const doomed = (await termState()).id;
  await page.locator(`.tab[data-id="${doomed}"]`).waitFor();
  await page.locator(`.tab[data-id="${doomed}"] .close`).click();
  await page.locator(`.tab[data-id="${doomed}"]`).waitFor({ state: 'detached' });
  await waitOnline();
  seen.closedTab = {
    stillListed: (await listTerminals()).some((t) => t.id === doomed),
    nowShowing: (await termState()).id,
    doomed,
  };

  // A daemon restart: the page is not stuck on a terminal id the new daemon never knew.
  await page.locator('.tab .label', { hasText: 'my build' }).click();
  await waitOnline();
  console.log(JSON.stringify({ restart: true }));
  const reply = await lines.next();
  if (reply.value !== 'restarted') throw new Error(`expected "restarted", got ${reply.value}`);
  await page.waitForFunction((old) => window.execTerminal.state.online && window.execTerminal.state.id !== old, firstId, {
    timeout: 30000,
  });
  await prompt();
  seen.afterRestart = { id: (await termState()).id, status: await page.locator('#status').innerText() };
  await typeLine('echo after-restart-$((2+3))');
  await waitForText('after-restart-5');
  await shot('after-restart');

  seen.consoleErrors = consoleErrors;
  console.log(JSON.stringify({ ok: true, ...seen }));
} catch (error) {
  await shot('failure').catch(() => {});
  const text = await bufferText().catch(() => '');
  console.log(JSON.stringify({ ok: false, error: String(error), screen: text, consoleErrors, ...seen }));
  process.exitCode = 1;
} finally {
  await close();
  proxy.close();
  cutConnections();
  input.close();
}
