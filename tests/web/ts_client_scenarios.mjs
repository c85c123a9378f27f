// Every verb of the TypeScript client (clients/typescript) against a real daemon, run the same
// way in Node (tests/node/ts_client.mjs) and in a Chromium page (tests/web/ts_client_page.mjs);
// tests/test_ts_client.py judges what they saw. Each step records its value or its error as
// plain JSON data: { value } or { error: { name, code, message, typed, stdout } }.

const plain = (value) =>
  JSON.parse(JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? Number(v) : v)));

async function attempt(client, step) {
  try {
    return { value: plain(await step()) };
  } catch (error) {
    return {
      error: {
        name: error?.name,
        code: error?.code,
        message: String(error?.message ?? error),
        typed: error instanceof client.ExecDaemonError,
        stdout: error?.stdout,
      },
    };
  }
}

// Polls `check` until it is true, for up to `seconds` (the daemon's machine may be loaded).
async function eventually(check, seconds) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return false;
}

// `client` is the imported module (@exec-daemon/client); `url`, `token`: the daemon's;
// `unreachable`: a URL where nothing listens; `marker`: a string unique to this run.
export async function scenarios(client, { url, token, unreachable, marker }) {
  const daemon = client.connect(url, { token });
  const run = (step) => attempt(client, step);
  const seen = {};

  seen.ping = await run(async () => {
    const pong = await daemon.ping();
    return { pid: pong.pid, workspace: pong.workspace };
  });
  // Shell sessions persist (a `cd` stays): these commands name their directories in full.
  const workspace = seen.ping.value?.workspace;

  const streamed = [];
  seen.run = await run(() =>
    daemon.shell.run('echo out; echo err >&2; exit 3', { onStdout: (text) => streamed.push(text) }),
  );
  seen.runStreamed = streamed.join('');
  seen.runCwd = await run(() => daemon.shell.run(`mkdir -p '${workspace}/sub' && cd '${workspace}' && pwd -P`));
  seen.runInCwd = await run(() => daemon.shell.run('pwd -P', { cwd: 'sub' }));
  seen.timeout = await run(() => daemon.shell.run('echo early; sleep 20', { timeoutMs: 3000 }));
  // The allowlist run mode (no permissions.json): a shell command waits for a person's approval.
  seen.needsApproval = await run(() =>
    daemon.shell.run(`touch '${workspace}/approved.txt'`, { runMode: client.RunMode.ALLOWLIST }),
  );
  seen.approvedFileExists = await run(() => daemon.shell.run(`test -e '${workspace}/approved.txt'`));
  // A command's own variables; a name that is not a variable name is refused as the call's
  // argument; a declared secret is redacted from the answer (the daemon runs with redaction on).
  seen.env = await run(() => daemon.shell.run('echo "$GREETING"', { env: { GREETING: 'hi' } }));
  seen.envBadName = await run(() => daemon.shell.run('echo ran', { env: { 'NOT-A-NAME': 'x' } }));
  seen.secretEnv = await run(() =>
    daemon.shell.run('echo "$API"', { env: { API: `s3cret-${marker}` }, secretEnv: ['API'] }),
  );
  seen.startEnv = await run(() => daemon.shell.start('echo "$GREETING"', { env: { GREETING: 'hey' } }).wait());

  seen.write = await run(() => daemon.files.write('notes/hello.txt', 'hello\nworld\n'));
  seen.read = await run(() => daemon.files.read('notes/hello.txt'));
  seen.edit = await run(() => daemon.files.edit('notes/hello.txt', 'world', 'there'));
  seen.readAfterEdit = await run(() => daemon.files.read('notes/hello.txt'));
  seen.editNoMatch = await run(() => daemon.files.edit('notes/hello.txt', 'absent', 'x'));
  seen.editMissingFile = await run(() => daemon.files.edit('notes/none.txt', 'a', 'b'));
  seen.list = await run(() => daemon.files.list('notes'));
  seen.glob = await run(() => daemon.files.glob('**/*.txt'));
  seen.grep = await run(() => daemon.files.grep('^there$'));
  seen.grepBadPattern = await run(() => daemon.files.grep('('));
  seen.bytes = await run(async () => {
    await daemon.files.writeBytes('blob.bin', new Uint8Array([0, 255, 1, 128]));
    return Array.from(await daemon.files.readBytes('blob.bin'));
  });
  seen.readMissing = await run(() => daemon.files.read('missing.txt'));
  // upload/download: a Blob up, into a WritableStream down (both exist in Node and browsers);
  // in Node, local paths too.
  const payload = new Uint8Array([7, 0, 255, 42, 13, 10]);
  seen.upload = await run(() => daemon.files.upload(new Blob([payload]), 'up/load.bin'));
  seen.download = await run(async () => {
    const pieces = [];
    const sink = new WritableStream({ write: (piece) => void pieces.push(...piece) });
    const size = await daemon.files.download('up/load.bin', sink);
    return { size, bytes: pieces };
  });
  seen.uploadOntoDirectory = await run(() => daemon.files.upload(new Blob([payload]), 'notes'));
  seen.downloadMissing = await run(() => daemon.files.download('missing.bin', new WritableStream()));
  await daemon.files.delete('up/load.bin').catch(() => undefined);
  if (globalThis.process?.versions?.node) {
    const fs = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    seen.localCopy = await run(async () => {
      const dir = await fs.mkdtemp(`${tmpdir()}/ts-client-`);
      await fs.writeFile(`${dir}/in.txt`, 'local');
      const sent = await daemon.files.upload(`${dir}/in.txt`, 'up/local.txt');
      const received = await daemon.files.download('up/local.txt', `${dir}/out.txt`);
      const same = (await fs.readFile(`${dir}/out.txt`, 'utf8')) === 'local';
      await fs.rm(dir, { recursive: true });
      await daemon.files.delete('up/local.txt');
      return { sent, received, same };
    });
  }
  seen.diff = await run(() => daemon.git.diff());
  seen.changesHash = await run(() => daemon.git.changesHash());
  seen.delete = await run(() => daemon.files.delete('blob.bin'));
  seen.deleteMissing = await run(() => daemon.files.delete('blob.bin'));
  seen.changesHashAfter = await run(() => daemon.git.changesHash());

  seen.call = await run(async () => {
    const answer = await daemon.call({ tool: { case: 'readTodosToolCall', value: { args: {} } } });
    return { tool: answer.tool.case, result: client.resultOf(answer).case };
  });
  seen.callUnknown = await run(() => daemon.call({}));

  seen.context = await run(async () => {
    await daemon.files.write('AGENTS.md', `Rule ${marker}.\n`);
    const context = await daemon.context(['notes/hello.txt']);
    return context.rules.map((rule) => rule.content);
  });
  seen.contextTooManyPaths = await run(() => daemon.context(Array(1001).fill('notes/hello.txt')));
  seen.mcpTools = await run(async () => (await daemon.mcp.tools()).map((server) => server.name));

  seen.start = await run(async () => {
    const handle = daemon.shell.start('read line; echo got:$line; read rest; echo rest:$rest');
    const started = await handle.started;
    await handle.writeStdin('abc\n');
    await eventually(() => handle.output().stdout.includes('got:abc'), 30);
    const midway = handle.output().stdout;
    await handle.writeStdin('', { close: true });
    const result = await handle.wait();
    return { shellId: started.shellId, pid: started.pid, midway, result };
  });
  // Aborted: wait() throws Aborted and the daemon stops the command.
  const sleeper = `sleep 59.${marker}`;
  const handle = daemon.shell.start(`echo begun; ${sleeper}`);
  await handle.started.catch(() => undefined);
  await eventually(() => handle.output().stdout.includes('begun'), 30);
  const sleeping = async () => (await daemon.shell.run(`pgrep -f '^${sleeper}$'`)).exitCode === 0;
  seen.runningBeforeAbort = await eventually(sleeping, 30);
  handle.abort();
  seen.abort = await run(() => handle.wait());
  seen.goneAfterAbort = await eventually(async () => !(await sleeping()), 30);

  // Every verb carries the token: with a wrong one each is refused as Unauthenticated.
  const wrong = client.connect(url, { token: 'wrong-token' });
  const verbs = {
    ping: () => wrong.ping(),
    'shell.run': () => wrong.shell.run('true'),
    'shell.start': () => wrong.shell.start('true').wait(),
    'files.read': () => wrong.files.read('notes/hello.txt'),
    'files.write': () => wrong.files.write('notes/other.txt', 'x'),
    'files.readBytes': () => wrong.files.readBytes('notes/hello.txt'),
    'files.writeBytes': () => wrong.files.writeBytes('notes/other.bin', new Uint8Array([1])),
    'files.edit': () => wrong.files.edit('notes/hello.txt', 'there', 'x'),
    'files.list': () => wrong.files.list('.'),
    'files.glob': () => wrong.files.glob('*'),
    'files.grep': () => wrong.files.grep('x'),
    'files.delete': () => wrong.files.delete('notes/hello.txt'),
    'files.upload': () => wrong.files.upload(new Blob(['x']), 'notes/other.bin'),
    'files.download': () => wrong.files.download('notes/hello.txt', new WritableStream()),
    context: () => wrong.context(),
    'mcp.tools': () => wrong.mcp.tools(),
    'git.diff': () => wrong.git.diff(),
    'git.changesHash': () => wrong.git.changesHash(),
    call: () => wrong.call({ tool: { case: 'readTodosToolCall', value: { args: {} } } }),
  };
  seen.wrongToken = {};
  for (const [verb, step] of Object.entries(verbs)) seen.wrongToken[verb] = await run(step);
  seen.stillThere = await run(() => daemon.files.read('notes/hello.txt'));

  seen.unreachable = await run(() => client.connect(unreachable, { token }).shell.run('true'));
  return seen;
}
