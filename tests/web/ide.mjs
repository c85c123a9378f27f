// Opens the browser IDE (code-server behind the daemon's token) in a real headless Chromium, as a
// person would: signs in with ?token=, sees the workspace's file tree, opens a file and reads it.
// Usage: node tests/web/ide.mjs IDE_URL TOKEN FILE_NAME FILE_TEXT SCREENSHOT.png
// Prints one JSON line with what it saw; exits non-zero (with a failure screenshot) on error.
import { launchChromium } from './chromium.mjs';

const [ideUrl, token, fileName, fileText, screenshotPath] = process.argv.slice(2);
const TIMEOUT_MS = 45000;

const { page, close } = await launchChromium({ width: 1280, height: 800 }, TIMEOUT_MS);
const failedRequests = [];
page.on('response', (response) => {
  if (response.status() === 401) failedRequests.push(`${response.status()} ${response.url()}`);
});

try {
  const signIn = new URL(ideUrl);
  signIn.searchParams.set('token', token);
  await page.goto(signIn.toString());
  const landedOn = page.url();
  const row = page.getByRole('treeitem', { name: fileName }).first();
  await row.waitFor();
  await row.click();
  await page.waitForFunction(
    (text) => [...document.querySelectorAll('.editor-instance .view-lines')].some((e) =>
      e.innerText.replace(/\u00a0/g, ' ').includes(text)),
    fileText,
  );
  const tab = await page.locator('.tabs-container .tab.active').innerText();
  await page.screenshot({ path: screenshotPath });
  console.log(JSON.stringify({
    ok: true,
    landedOn,
    tokenLeftTheAddressBar: !page.url().includes(token) && !landedOn.includes(token),
    activeTab: tab.replace(/\s+/g, ''),
    refusedRequests: failedRequests,
  }));
} catch (error) {
  await page.screenshot({ path: screenshotPath }).catch(() => {});
  console.log(JSON.stringify({ ok: false, error: String(error), url: page.url(), refusedRequests: failedRequests }));
  process.exitCode = 1;
} finally {
  await close();
}
