// A web app on another origin calls the daemon's RPC port from a real headless Chromium with
// @connectrpc/connect-web (driven by tests/test_cors.py): Ping, then a server-streaming
// ControlService.Exec over Connect and over gRPC-Web, a wrong token, and the same Ping from an
// origin the daemon does not allow.
// Usage: node tests/web/cors_page.mjs RPC_URL TOKEN PAGE_PORT DESCRIPTOR_SET
// Serves the page on 127.0.0.1:PAGE_PORT, opened as http://localhost:PAGE_PORT (the allowed
// origin) and as http://127.0.0.1:PAGE_PORT (another origin). No codegen: the page builds the
// services from the descriptor set. Prints one JSON line with what each page saw.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { launchChromium } from './chromium.mjs';
import { importMap, packageFile } from './modules.mjs';

const [rpcUrl, token, pagePort, descriptorSetPath] = process.argv.slice(2);
const TIMEOUT_MS = 20000;
const PACKAGES = ['@bufbuild/protobuf', '@connectrpc/connect', '@connectrpc/connect-web'];

// Runs in the page: every call the test makes, each result or error as plain data.
const PAGE_SCRIPT = `
import { createFileRegistry, fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-web';

const { rpcUrl, token, full } = JSON.parse(document.body.dataset.config);
const bytes = new Uint8Array(await (await fetch('/descriptors.binpb')).arrayBuffer());
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, bytes));
const control = (transport) => createClient(registry.getService('agent.v1.ControlService'), transport);
const connect = createConnectTransport({ baseUrl: rpcUrl });
const grpcWeb = createGrpcWebTransport({ baseUrl: rpcUrl });
const headers = { authorization: 'Bearer ' + token };
const failure = (error) => {
  const e = ConnectError.from(error);
  return { code: e.code, message: e.rawMessage };
};

async function ping(transport, callHeaders) {
  try {
    const pong = await control(transport).ping({}, { headers: callHeaders });
    return { pid: pong.pid, version: pong.version };
  } catch (error) {
    return { error: failure(error) };
  }
}

async function streamShell(transport) {
  const call = {
    toolCall: { tool: { case: 'shellToolCall', value: { args: {
      command: 'for i in 1 2 3; do echo line$i; sleep 0.05; done', timeout: 20000,
    } } } },
  };
  const kinds = [];
  let stdout = '';
  let exitCode = null;
  try {
    for await (const message of control(transport).exec(call, { headers })) {
      kinds.push(message.message.case);
      if (message.message.case === 'toolCallResult') {
        const result = message.message.value.tool.value.result.result;
        kinds.push(result.case);
        stdout = result.value.stdout ?? '';
        exitCode = result.value.exitCode ?? null;
      }
    }
    return { kinds, stdout, exitCode };
  } catch (error) {
    return { kinds, error: failure(error) };
  }
}

const seen = { ping: await ping(connect, headers) };
if (full) {
  seen.grpcWebPing = await ping(grpcWeb, headers);
  seen.connectExec = await streamShell(connect);
  seen.grpcWebExec = await streamShell(grpcWeb);
  seen.wrongToken = await ping(connect, { authorization: 'Bearer wrong' });
}
window.seen = seen;
`;

function pageHtml(config) {
  return `<!doctype html><html><head><meta charset="utf-8">
<script type="importmap">${JSON.stringify(importMap(PACKAGES))}</script></head>
<body data-config='${JSON.stringify(config)}'><script type="module">${PAGE_SCRIPT}</script></body></html>`;
}

const server = createServer((request, response) => {
  const url = new URL(request.url, 'http://page');
  const send = (status, type, body) => {
    response.writeHead(status, { 'content-type': type });
    response.end(body);
  };
  if (url.pathname === '/') {
    const full = url.searchParams.get('full') === '1';
    send(200, 'text/html; charset=utf-8', pageHtml({ rpcUrl, token, full }));
  } else if (url.pathname === '/descriptors.binpb') {
    send(200, 'application/octet-stream', readFileSync(descriptorSetPath));
  } else if (url.pathname.startsWith('/node_modules/')) {
    const file = packageFile(url.pathname, PACKAGES);
    if (file === null) return send(404, 'text/plain', 'not served\n');
    try {
      send(200, 'text/javascript', readFileSync(file));
    } catch {
      send(404, 'text/plain', 'no such file\n');
    }
  } else {
    send(404, 'text/plain', 'not found\n');
  }
});
await new Promise((resolve) => server.listen(Number(pagePort), '127.0.0.1', resolve));

const { page, close } = await launchChromium(undefined, TIMEOUT_MS);
const pageErrors = [];
page.on('pageerror', (error) => pageErrors.push(String(error)));

async function visit(origin, full) {
  await page.goto(`${origin}/${full ? '?full=1' : ''}`);
  await page.waitForFunction(() => window.seen !== undefined);
  return page.evaluate(() => window.seen);
}

let exitCode = 0;
try {
  const allowed = await visit(`http://localhost:${pagePort}`, true);
  const other = await visit(`http://127.0.0.1:${pagePort}`, false);
  console.log(JSON.stringify({ allowed, other, pageErrors }));
} catch (error) {
  console.error(error);
  console.log(JSON.stringify({ failed: String(error), pageErrors }));
  exitCode = 1;
} finally {
  await close();
  server.close();
}
process.exit(exitCode);
