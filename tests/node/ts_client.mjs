// The TypeScript client (clients/typescript/dist, built by scripts/build-ts-client) in Node,
// driven by tests/test_ts_client.py.
//   node ts_client.mjs scenarios URL TOKEN UNREACHABLE_URL MARKER
//       every verb (tests/web/ts_client_scenarios.mjs); prints one JSON document.
//   node ts_client.mjs killed URL TOKEN
//       starts a long command, prints "running SESSION_PID" once its output came, then waits for
//       it: the test kills the daemon meanwhile; prints the error the call ended with, as JSON.
import * as client from '../../clients/typescript/dist/index.js';
import { scenarios } from '../web/ts_client_scenarios.mjs';

const [scenario, url, token, unreachable, marker] = process.argv.slice(2);

if (scenario === 'scenarios') {
  console.log(JSON.stringify(await scenarios(client, { url, token, unreachable, marker })));
} else if (scenario === 'killed') {
  const daemon = client.connect(url, { token });
  let outcome;
  try {
    // $$: the daemon's shell session, the leader of the command's process group.
    await daemon.shell.run('echo running $$; sleep 120', {
      timeoutMs: 300000,
      onStdout: (text) => {
        if (text.startsWith('running')) console.log(text.trim());
      },
    });
    outcome = { error: null };
  } catch (error) {
    outcome = { error: { name: error.name, code: error.code, typed: error instanceof client.Unavailable } };
  }
  console.log(JSON.stringify(outcome));
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
