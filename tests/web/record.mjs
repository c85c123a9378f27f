// Opens the session record's replay page (GET /record on the PTY port) in headless Chromium:
// the timeline, the refusals filter, a shell call's output played back, an edit's diff, a
// terminal's output. Usage: node tests/web/record.mjs PTY_URL TOKEN SCREENSHOT_DIR
// Prints one JSON line of what it saw; exits non-zero (with a failure screenshot) otherwise.
import path from 'node:path';
import { launchChromium } from './chromium.mjs';

const [baseUrl, token, shots] = process.argv.slice(2);
const TIMEOUT_MS = 45000;
const { page, close } = await launchChromium({ width: 1280, height: 760 }, TIMEOUT_MS);
const errors = [];
page.on('pageerror', (error) => errors.push(String(error)));

async function selectEntry(kind, tool) {
  await page.evaluate(
    ([kind, tool]) => {
      const { state, select } = window.execRecord;
      const entry = state.entries.find((e) => e.kind === kind && (!tool || e.tool === tool));
      return select(entry);
    },
    [kind, tool],
  );
}

async function playedText() {
  await page.waitForFunction(() => window.execRecord.playback?.done === true);
  return page.evaluate(() => window.execRecord.screenText());
}

try {
  await page.goto(`${baseUrl}/record?token=${token}`);
  await page.waitForSelector('#timeline li');
  const seen = {};
  seen.address = page.url();
  seen.rows = await page.locator('#timeline li').count();
  await page.screenshot({ path: path.join(shots, 'timeline.png') });

  await page.check('#refusals');
  seen.refusedRows = await page.locator('#timeline li').count();
  seen.allRefused = await page.locator('#timeline li:not(.refused)').count() === 0;
  await page.uncheck('#refusals');

  await page.selectOption('#speed', '8');
  await selectEntry('cast', 'shell_tool_call');
  seen.cast = await playedText();
  await page.screenshot({ path: path.join(shots, 'cast.png') });

  await selectEntry('edit');
  seen.diffAdded = await page.locator('#diff .add').allTextContents();
  await page.screenshot({ path: path.join(shots, 'diff.png') });

  await page.selectOption('#speed', '0');
  await selectEntry('pty');
  seen.pty = await playedText();
  await page.screenshot({ path: path.join(shots, 'pty.png') });
  seen.errors = errors;
  console.log(JSON.stringify(seen));
  await close();
} catch (error) {
  await page.screenshot({ path: path.join(shots, 'failure.png') }).catch(() => {});
  console.error(String(error.stack || error), errors);
  await close();
  process.exit(1);
}
