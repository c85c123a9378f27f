// The TypeScript client (clients/typescript/dist) in a real headless Chromium, on a page whose
// origin the daemon allows (--cors-allowed-origins), driven by tests/test_ts_client.py.
// Usage: node tests/web/ts_client_page.mjs RPC_URL TOKEN PAGE_PORT UNREACHABLE_URL MARKER
// Serves the page on 127.0.0.1:PAGE_PORT, opened as http://localhost:PAGE_PORT; the client and
// its npm dependencies are loaded as ES modules through an import map (no bundler). Runs
// tests/web/ts_client_scenarios.mjs in the page and prints one JSON line of what it saw.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import path from 'node:path';
import { launchChromium } from './chromium.mjs';
import { importMap, packageFile } from './modules.mjs';

const [rpcUrl, token, pagePort, unreachable, marker] = process.argv.slice(2);
const TIMEOUT_MS = 120000;
const PACKAGES = ['@bufbuild/protobuf', '@connectrpc/connect', '@connectrpc/connect-web'];
const CLIENT_DIST = path.resolve('clients/typescript/dist');
const SCENARIOS = path.resolve('tests/web/ts_client_scenarios.mjs');

const PAGE_SCRIPT = `
import * as client from '@exec-daemon/client';
import { scenarios } from '/scenarios.mjs';
const config = JSON.parse(document.body.dataset.config);
window.seen = await scenarios(client, config);
`;

function pageHtml(config) {
  const map = importMap(PACKAGES);
  map.imports['@exec-daemon/client'] = '/client/index.js';
  return `<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">${JSON.stringify(map)}</script></head>
<body data-config='${JSON.stringify(config)}'><script type="module">${PAGE_SCRIPT}</script></body></html>`;
}

function servedFile(pathname) {
  if (pathname === '/scenarios.mjs') return SCENARIOS;
  if (pathname.startsWith('/node_modules/')) return packageFile(pathname, PACKAGES);
  if (pathname.startsWith('/client/')) {
    const file = path.resolve(CLIENT_DIST, pathname.slice('/client/'.length));
    return file.startsWith(CLIENT_DIST + '/') ? file : null;
  }
  return null;
}

const server = createServer((request, response) => {
  const url = new URL(request.url, 'http://page');
  const send = (status, type, body) => {
    response.writeHead(status, { 'content-type': type });
    response.end(body);
  };
  if (url.pathname === '/') {
    const config = { url: rpcUrl, token, unreachable, marker };
    return send(200, 'text/html; charset=utf-8', pageHtml(config));
  }
  const file = servedFile(url.pathname);
  if (file === null) return send(404, 'text/plain', 'not served\n');
  try {
    send(200, 'text/javascript', readFileSync(file));
  } catch {
    send(404, 'text/plain', 'no such file\n');
  }
});
await new Promise((resolve) => server.listen(Number(pagePort), '127.0.0.1', resolve));

const { page, close } = await launchChromium(undefined, TIMEOUT_MS);
const pageErrors = [];
page.on('pageerror', (error) => pageErrors.push(String(error)));

let exitCode = 0;
try {
  await page.goto(`http://localhost:${pagePort}/`);
  await page.waitForFunction(() => window.seen !== undefined, null, { polling: 200 });
  const seen = await page.evaluate(() => window.seen);
  console.log(JSON.stringify({ seen, pageErrors }));
} catch (error) {
  console.error(error);
  console.log(JSON.stringify({ failed: String(error), pageErrors }));
  exitCode = 1;
} finally {
  await close();
  server.close();
}
process.exit(exitCode);
