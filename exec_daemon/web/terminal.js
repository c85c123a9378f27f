// The web terminal: lists the daemon's terminals, attaches xterm.js to one over the PTY
// WebSocket protocol (wire-contract.md), follows the window's size, and reattaches after a
// reload (the URL hash names the terminal; the scrollback is replayed) or a dropped connection
// (from the last offset received: no gap, no duplicate).
import { Terminal } from '/assets/xterm.mjs';
import { FitAddon } from '/assets/addon-fit.mjs';

const CLOSE_UNKNOWN_TERMINAL = 4404;
const RECONNECT_MS = 1000;
const LIST_REFRESH_MS = 5000;

const statusEl = document.getElementById('status');
const listEl = document.getElementById('terminals');
const encoder = new TextEncoder();

const state = {
  token: takeToken(),
  ws: null,
  id: null,
  offset: 0,
  exited: false,
  reconnectTimer: null,
};

const term = new Terminal({
  cursorBlink: true,
  scrollback: 10000,
  fontSize: 14,
  fontFamily: '"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
  // At 1.0 some fonts' underscores fall below the cell and vanish.
  lineHeight: 1.15,
});
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById('terminal'));
fit.fit();
new ResizeObserver(() => fit.fit()).observe(document.getElementById('terminal'));

term.onData((data) => sendInput(encoder.encode(data)));
term.onBinary((data) => sendInput(Uint8Array.from(data, (c) => c.charCodeAt(0))));
term.onResize(({ cols, rows }) => sendControl({ type: 'resize', cols, rows }));

// For tests and debugging from the console.
window.execTerminal = { term, state };

function takeToken() {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    // Keep the token out of the address bar and the history.
    sessionStorage.setItem('exec-daemon-token', fromUrl);
    url.searchParams.delete('token');
    history.replaceState(null, '', url);
    return fromUrl;
  }
  return sessionStorage.getItem('exec-daemon-token');
}

function setStatus(text) {
  statusEl.textContent = text;
}

function sendInput(bytes) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN && !state.exited) state.ws.send(bytes);
}

function sendControl(message) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
}

function socketUrl(path, params) {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('token', state.token);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, String(value));
  return url;
}

function detach() {
  clearTimeout(state.reconnectTimer);
  if (state.ws) {
    state.ws.onclose = null;
    state.ws.close();
    state.ws = null;
  }
}

// id null: a new terminal. since: the absolute offset to replay from.
function attach(id, since) {
  detach();
  state.exited = false;
  const params = id === null ? { cols: term.cols, rows: term.rows } : { since };
  const path = id === null ? '/terminals/new' : `/terminals/${encodeURIComponent(id)}`;
  const ws = new WebSocket(socketUrl(path, params));
  ws.binaryType = 'arraybuffer';
  state.ws = ws;
  setStatus('connecting…');
  ws.onmessage = (event) => {
    if (typeof event.data === 'string') {
      onControl(JSON.parse(event.data));
      return;
    }
    const bytes = new Uint8Array(event.data);
    state.offset += bytes.length;
    term.write(bytes);
  };
  ws.onclose = (event) => onClose(event);
}

function onControl(message) {
  if (message.type === 'attached') {
    state.id = message.id;
    state.offset = message.offset;
    history.replaceState(null, '', `#${encodeURIComponent(message.id)}`);
    if (message.truncated) {
      term.write('\x1b[2m[earlier output is no longer in the scrollback]\x1b[0m\r\n');
    }
    if (message.cols !== term.cols || message.rows !== term.rows) {
      sendControl({ type: 'resize', cols: term.cols, rows: term.rows });
    }
    setStatus(`attached to ${message.id}`);
    term.focus();
    refreshList();
  } else if (message.type === 'exit') {
    state.exited = true;
    term.write(`\r\n\x1b[2m[process exited with code ${message.code}]\x1b[0m\r\n`);
    setStatus(`exited with code ${message.code}`);
    refreshList();
  } else if (message.type === 'error') {
    setStatus(message.message);
  }
}

function onClose(event) {
  state.ws = null;
  if (state.exited) return;
  if (event.code === CLOSE_UNKNOWN_TERMINAL) {
    setStatus(event.reason || 'unknown terminal');
    state.id = null;
    history.replaceState(null, '', location.pathname);
    refreshList();
    return;
  }
  if (state.id === null) {
    setStatus(`closed: ${event.reason || event.code}`);
    return;
  }
  // Dropped (network, server restart, too slow): resume from the last byte received.
  setStatus(`disconnected (${event.reason || event.code}), reconnecting…`);
  state.reconnectTimer = setTimeout(() => attach(state.id, state.offset), RECONNECT_MS);
}

function show(id) {
  term.reset();
  state.offset = 0;
  attach(id, 0);
}

async function refreshList() {
  let terminals;
  try {
    const response = await fetch('/terminals', {
      headers: { Authorization: `Bearer ${state.token}` },
      cache: 'no-store',
    });
    if (response.status === 401) {
      askToken('the token was refused');
      return;
    }
    terminals = await response.json();
  } catch (error) {
    setStatus(`cannot list terminals: ${error}`);
    return;
  }
  listEl.replaceChildren(
    ...terminals.map((info) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = info.exited ? `${info.name} (exit ${info.exit_code})` : info.name;
      button.title = info.description || info.command || info.id;
      button.dataset.id = info.id;
      button.classList.toggle('current', info.id === state.id);
      button.classList.toggle('exited', info.exited);
      button.onclick = () => show(info.id);
      return button;
    }),
  );
}

function askToken(reason) {
  detach();
  const form = document.getElementById('login');
  form.hidden = false;
  setStatus(reason);
  form.onsubmit = (event) => {
    event.preventDefault();
    state.token = document.getElementById('token').value.trim();
    sessionStorage.setItem('exec-daemon-token', state.token);
    form.hidden = true;
    start();
  };
}

function start() {
  const hashId = decodeURIComponent(location.hash.slice(1));
  refreshList();
  if (hashId) attach(hashId, 0);
  else setStatus('pick a terminal or open a new one');
}

document.getElementById('new-terminal').onclick = () => {
  term.reset();
  state.id = null;
  state.offset = 0;
  attach(null, 0);
};
setInterval(() => state.token && refreshList(), LIST_REFRESH_MS);

if (state.token) start();
else askToken('enter the daemon token');
