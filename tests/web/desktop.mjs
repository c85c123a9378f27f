// Drives the daemon's desktop page (exec_daemon/web/desktop.html) in a real headless Chromium
// for tests/test_desktop.py, one command at a time: a JSON object per line on stdin, a JSON
// answer per line on stdout ({"ok": false, "error": ...} when a command fails).
// Usage: node tests/web/desktop.mjs
//   {"cmd": "open", "url": U}           -> opens U, waits until the desktop is connected:
//                                          {"url", "mode", "rect": {x, y, width, height}, "fb": [w, h]}
//   {"cmd": "shot", "path": P}          -> a screenshot of the page in P, with "rect" and "fb"
//   {"cmd": "toggle"}                   -> presses Take control / Hand back, waits for the reconnect
//   {"cmd": "reconnected", "after": N}  -> waits until the page has connected more than N times
import readline from 'node:readline';
import { launchChromium } from './chromium.mjs';

const TIMEOUT_MS = 20000;
const { page, close } = await launchChromium({ width: 960, height: 640 }, TIMEOUT_MS);
const consoleErrors = [];
page.on('pageerror', (error) => consoleErrors.push(String(error)));

async function connected() {
  await page.waitForSelector('body[data-connected="true"] #screen canvas');
  return page.evaluate(() => {
    const canvas = document.querySelector('#screen canvas');
    const r = canvas.getBoundingClientRect();
    return {
      url: location.href,
      mode: document.body.dataset.mode,
      rect: { x: r.x, y: r.y, width: r.width, height: r.height },
      fb: [canvas.width, canvas.height],
      connects: Number(document.body.dataset.connects),
    };
  }).then((seen) => ({ ...seen, consoleErrors }));
}

const commands = {
  async open({ url }) {
    const response = await page.goto(url);
    if (response.status() !== 200) return { status: response.status() };
    return { status: 200, ...(await connected()) };
  },
  async shot({ path: file }) {
    await page.screenshot({ path: file });
    return connected();
  },
  async toggle() {
    const before = await page.evaluate(() => document.body.dataset.mode);
    await page.click('#toggle');
    await page.waitForFunction((old) => document.body.dataset.mode !== old, before);
    return connected();
  },
  async reconnected({ after }) {
    await page.waitForFunction((n) => Number(document.body.dataset.connects) > n, after);
    return connected();
  },
};

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const request = JSON.parse(line);
  if (request.cmd === 'quit') break;
  try {
    console.log(JSON.stringify({ ok: true, ...(await commands[request.cmd](request)) }));
  } catch (error) {
    console.log(JSON.stringify({ ok: false, error: String(error) }));
  }
}
await close();
