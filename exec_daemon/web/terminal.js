// The web terminal: tabs for the daemon's terminals over the PTY WebSocket protocol (described
// in exec_daemon/rpc/pty_server.py), xterm.js with links, find, paste and copy, a theme and a
// font size kept in localStorage.
//
// - A shell opens on first load; the URL hash names the current terminal, so a reload
//   reattaches and replays its scrollback.
// - A dropped connection shows an overlay and pauses input (nothing typed is lost silently),
//   then reattaches from the last byte received (?since=): no gap, no duplicate. A terminal the
//   daemon no longer knows (it restarted) gives way to a fresh shell.
// - Every viewer offers the size its window fits; the terminal takes the smallest offer and
//   every viewer draws at that size (tmux's `window-size smallest`).
// - The token comes once in ?token= and is then kept in this origin's localStorage, out of the
//   address bar: see "The web terminal's token" in SECURITY.md.
import { Terminal } from '/assets/xterm.mjs';
import { FitAddon } from '/assets/addon-fit.mjs';
import { SearchAddon } from '/assets/addon-search.mjs';
import { WebLinksAddon } from '/assets/addon-web-links.mjs';

const CLOSE_UNKNOWN_TERMINAL = 4404;
const RECONNECT_MS = [500, 1000, 2000, 4000];
const LIST_REFRESH_MS = 5000;
const TOKEN_KEY = 'exec-daemon-token';
const SETTINGS_KEY = 'exec-daemon-settings';
const FONT_SIZES = { min: 8, max: 32, default: 14 };
const THEMES = {
  dark: { background: '#1e1e1e', foreground: '#d4d4d4', cursor: '#d4d4d4', selectionBackground: '#264f78' },
  light: { background: '#ffffff', foreground: '#222222', cursor: '#222222', selectionBackground: '#add6ff' },
};

const statusEl = document.getElementById('status');
const listEl = document.getElementById('terminals');
const overlayEl = document.getElementById('overlay');
const encoder = new TextEncoder();

const settings = loadSettings();
const state = {
  token: takeToken(),
  ws: null,
  id: null,
  offset: 0,
  // Output before this offset is a replay; replaying counts its writes xterm still parses.
  replayEnd: 0,
  replaying: 0,
  exited: false,
  online: false,
  reconnectTimer: null,
  reconnectAttempt: 0,
  titles: {},
  // Said once the next terminal is attached (why the page switched terminals).
  notice: '',
  listing: [],
};

const term = new Terminal({
  cursorBlink: true,
  scrollback: 10000,
  fontSize: settings.fontSize,
  theme: THEMES[settings.theme],
  fontFamily: '"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
  // At 1.0 some fonts' underscores fall below the cell and vanish.
  lineHeight: 1.15,
  disableStdin: true,
  // The search addon's match highlighting uses xterm's decoration API.
  allowProposedApi: true,
});
const fit = new FitAddon();
const search = new SearchAddon();
term.loadAddon(fit);
term.loadAddon(search);
term.loadAddon(new WebLinksAddon());
term.open(document.getElementById('terminal'));
applyTheme();
offerSize();
new ResizeObserver(() => offerSize()).observe(document.getElementById('terminal'));

term.onData((data) => {
  // Replayed output holds the queries programs made long ago (tmux asks for the terminal's
  // attributes when it attaches); answering them now would type the answers into the shell.
  if (state.replaying > 0 && data.startsWith('\x1b')) return;
  sendInput(encoder.encode(data));
});
term.onBinary((data) => sendInput(Uint8Array.from(data, (c) => c.charCodeAt(0))));
term.onTitleChange((title) => {
  if (state.id === null) return;
  state.titles[state.id] = title;
  renderTabs();
});
term.attachCustomKeyEventHandler(onKey);
// Copy on select, as in ttyd and most Linux terminals.
term.element.addEventListener('mouseup', () => {
  if (term.hasSelection()) copyText(term.getSelection());
});

// For tests and debugging from the console.
window.execTerminal = { term, state, search };

// -- the token ---------------------------------------------------------------------------------

function takeToken() {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    // Keep the token out of the address bar and the history.
    localStorage.setItem(TOKEN_KEY, fromUrl);
    url.searchParams.delete('token');
    history.replaceState(null, '', url);
    return fromUrl;
  }
  return localStorage.getItem(TOKEN_KEY);
}

function askToken(reason) {
  detach();
  localStorage.removeItem(TOKEN_KEY);
  const form = document.getElementById('login');
  form.hidden = false;
  setStatus(reason);
  form.onsubmit = (event) => {
    event.preventDefault();
    state.token = document.getElementById('token').value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    form.hidden = true;
    start();
  };
}

// -- settings ----------------------------------------------------------------------------------

function loadSettings() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {};
  } catch {
    saved = {};
  }
  const fontSize = Number.isInteger(saved.fontSize) ? saved.fontSize : FONT_SIZES.default;
  return {
    theme: saved.theme in THEMES ? saved.theme : 'dark',
    fontSize: Math.min(FONT_SIZES.max, Math.max(FONT_SIZES.min, fontSize)),
  };
}

function saveSettings() {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
}

function applyTheme() {
  term.options.theme = THEMES[settings.theme];
  document.body.classList.toggle('light', settings.theme === 'light');
}

function setFontSize(size) {
  settings.fontSize = Math.min(FONT_SIZES.max, Math.max(FONT_SIZES.min, size));
  term.options.fontSize = settings.fontSize;
  saveSettings();
  offerSize();
}

document.getElementById('font-smaller').onclick = () => setFontSize(settings.fontSize - 1);
document.getElementById('font-larger').onclick = () => setFontSize(settings.fontSize + 1);
document.getElementById('theme').onclick = () => {
  settings.theme = settings.theme === 'dark' ? 'light' : 'dark';
  saveSettings();
  applyTheme();
};

// -- keys, clipboard, find ---------------------------------------------------------------------

function onKey(event) {
  if (event.type !== 'keydown') return true;
  const key = event.key.toLowerCase();
  const ctrl = event.ctrlKey && !event.altKey && !event.metaKey;
  // Ctrl+V / Ctrl+Shift+V: let the browser paste (xterm takes the paste event, bracketed).
  if (ctrl && key === 'v') return false;
  // Ctrl+C with a selection copies (Ctrl+C without one is ^C); Ctrl+Insert copies too. Not
  // Ctrl+Shift+C: browsers open the element inspector on it.
  if ((ctrl && key === 'c' && !event.shiftKey && term.hasSelection()) || (ctrl && key === 'insert')) {
    copyText(term.getSelection());
    term.clearSelection();
    event.preventDefault();
    return false;
  }
  if (ctrl && event.shiftKey && key === 'f') {
    event.preventDefault();
    openFind();
    return false;
  }
  return true;
}

async function copyText(text) {
  if (!text) return;
  try {
    // Only in a secure context (https or localhost).
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // Plain http on another host: the older way, through a selected text area.
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
  term.focus();
}

const findBar = document.getElementById('findbar');
const findText = document.getElementById('find-text');
const findOptions = {
  decorations: {
    matchOverviewRuler: '#888',
    activeMatchColorOverviewRuler: '#ffcc00',
    matchBackground: '#5a4a00',
    activeMatchBackground: '#b58900',
  },
};

function openFind() {
  findBar.hidden = false;
  findText.focus();
  findText.select();
}

function closeFind() {
  findBar.hidden = true;
  search.clearDecorations();
  term.focus();
}

search.onDidChangeResults(({ resultIndex, resultCount }) => {
  document.getElementById('find-count').textContent = resultCount
    ? `${resultIndex + 1} of ${resultCount}`
    : 'no results';
});
document.getElementById('find').onclick = openFind;
document.getElementById('find-close').onclick = closeFind;
document.getElementById('find-previous').onclick = () => search.findPrevious(findText.value, findOptions);
findBar.onsubmit = (event) => {
  event.preventDefault();
  search.findNext(findText.value, findOptions);
};
findText.addEventListener('input', () => search.findNext(findText.value, { ...findOptions, incremental: true }));
findText.addEventListener('keydown', (event) => {
  if (event.key === 'Escape') closeFind();
  if (event.key === 'Enter' && event.shiftKey) {
    event.preventDefault();
    search.findPrevious(findText.value, findOptions);
  }
});

// -- the connection ----------------------------------------------------------------------------

function setStatus(text) {
  statusEl.textContent = text;
}

function setOnline(online, detail = '') {
  state.online = online;
  term.options.disableStdin = !online;
  overlayEl.hidden = online;
  document.getElementById('overlay-detail').textContent = detail;
}

function sendInput(bytes) {
  if (state.online && !state.exited) state.ws.send(bytes);
}

function sendControl(message) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
}

// What this window fits; the daemon answers with the size to draw at ("size").
function offerSize() {
  const fits = fit.proposeDimensions();
  if (!fits || !fits.cols || !fits.rows) return;
  if (state.online) sendControl({ type: 'resize', cols: fits.cols, rows: fits.rows });
  else if (state.id === null) term.resize(fits.cols, fits.rows);
}

function socketUrl(path, params) {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.hash = '';
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
  state.online = false;
  term.options.disableStdin = true;
}

// id null: a new (shared) shell. since: the absolute offset to replay from.
function attach(id, since) {
  detach();
  state.exited = false;
  const fits = fit.proposeDimensions() || { cols: term.cols, rows: term.rows };
  const params = id === null ? { cols: fits.cols, rows: fits.rows, shared: 1 } : { since };
  const path = id === null ? '/terminals/new' : `/terminals/${encodeURIComponent(id)}`;
  const ws = new WebSocket(socketUrl(path, params));
  ws.binaryType = 'arraybuffer';
  state.ws = ws;
  if (overlayEl.hidden) setStatus('connecting…');
  ws.onmessage = (event) => {
    if (typeof event.data === 'string') {
      onControl(JSON.parse(event.data));
      return;
    }
    const bytes = new Uint8Array(event.data);
    const replayed = state.offset < state.replayEnd;
    state.offset += bytes.length;
    if (!replayed) {
      term.write(bytes);
      return;
    }
    state.replaying += 1;
    term.write(bytes, () => {
      state.replaying -= 1;
    });
  };
  ws.onclose = (event) => onClose(event);
}

function onControl(message) {
  if (message.type === 'attached') {
    state.id = message.id;
    state.offset = message.offset;
    state.replayEnd = message.end;
    state.reconnectAttempt = 0;
    history.replaceState(null, '', `#${encodeURIComponent(message.id)}`);
    if (message.truncated) {
      term.write('\x1b[2m[earlier output is no longer in the scrollback]\x1b[0m\r\n');
    }
    term.resize(message.cols, message.rows);
    setOnline(true);
    offerSize();
    setStatus(state.notice);
    state.notice = '';
    term.focus();
    refreshList();
  } else if (message.type === 'size') {
    term.resize(message.cols, message.rows);
  } else if (message.type === 'exit') {
    state.exited = true;
    term.options.disableStdin = true;
    term.write(`\r\n\x1b[2m[process exited with code ${message.code}]\x1b[0m\r\n`);
    setStatus(`exited with code ${message.code}`);
    refreshList();
  } else if (message.type === 'error') {
    setStatus(message.message);
  }
}

function onClose(event) {
  state.ws = null;
  state.online = false;
  term.options.disableStdin = true;
  if (state.exited) return;
  if (event.code === CLOSE_UNKNOWN_TERMINAL) {
    // The daemon does not know it (it restarted, or the terminal was closed): a fresh shell.
    state.notice = `terminal ${state.id ?? ''} is gone (the daemon restarted?); opened a new shell`;
    setOnline(true);
    openNew();
    return;
  }
  // Dropped (network, daemon restart, too slow): resume from the last byte received.
  const delay = RECONNECT_MS[Math.min(state.reconnectAttempt, RECONNECT_MS.length - 1)];
  state.reconnectAttempt += 1;
  setOnline(false, `connection lost (${event.reason || event.code}); reconnecting…`);
  setStatus('offline');
  state.reconnectTimer = setTimeout(() => {
    refreshList();
    attach(state.id, state.offset);
  }, delay);
}

function show(id) {
  if (id === state.id && state.online) return;
  term.reset();
  state.offset = 0;
  attach(id, 0);
}

function openNew() {
  term.reset();
  state.id = null;
  state.offset = 0;
  attach(null, 0);
}

// A control message to a terminal that may not be the one shown (rename, close a tab); done
// when the daemon answers ("renamed", "error") or closes (the terminal ended).
function controlOnce(id, message) {
  return new Promise((resolve) => {
    const path = `/terminals/${encodeURIComponent(id)}`;
    const ws = new WebSocket(socketUrl(path, { since: Number.MAX_SAFE_INTEGER }));
    ws.onmessage = (event) => {
      if (typeof event.data !== 'string') return;
      const reply = JSON.parse(event.data);
      if (reply.type === 'attached') ws.send(JSON.stringify(message));
      if (reply.type === 'error') setStatus(reply.message);
      if (reply.type === 'renamed' || reply.type === 'error') ws.close();
    };
    ws.onclose = () => resolve();
  });
}

// -- the tabs ----------------------------------------------------------------------------------

function label(info) {
  return info.renamed ? info.name : state.titles[info.id] || info.name;
}

function renderTabs() {
  const current = state.listing.find((info) => info.id === state.id);
  const title = current ? label(current) : state.titles[state.id];
  document.title = title ? `${title} — exec-daemon` : 'exec-daemon terminals';
  listEl.replaceChildren(...state.listing.map(tab));
}

function tab(info) {
  const element = document.createElement('span');
  element.className = 'tab';
  element.dataset.id = info.id;
  element.classList.toggle('current', info.id === state.id);
  element.classList.toggle('exited', info.exited);
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'label';
  button.textContent = info.exited ? `${label(info)} (exit ${info.exit_code})` : label(info);
  const shared = info.shared ? `\nthe agent reads it with: ${info.shared.read_screen}` : '';
  button.title = `${info.description || info.command || info.id}${shared}\ndouble-click to rename`;
  button.onclick = () => show(info.id);
  button.ondblclick = () => rename(element, info);
  const close = document.createElement('button');
  close.type = 'button';
  close.className = 'close';
  close.textContent = '×';
  close.title = 'Close (ends the terminal)';
  close.setAttribute('aria-label', `close ${label(info)}`);
  close.onclick = () => closeTab(info.id);
  element.append(button, close);
  return element;
}

function rename(element, info) {
  const input = document.createElement('input');
  input.value = label(info);
  input.setAttribute('aria-label', 'terminal name');
  element.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = async (keep) => {
    if (done) return;
    done = true;
    const name = input.value.trim();
    if (keep && name && name !== label(info)) await controlOnce(info.id, { type: 'rename', name });
    await refreshList();
  };
  input.onkeydown = (event) => {
    if (event.key === 'Enter') finish(true);
    if (event.key === 'Escape') finish(false);
  };
  input.onblur = () => finish(true);
}

async function closeTab(id) {
  if (id === state.id) {
    detach();
    state.exited = true;
  }
  await controlOnce(id, { type: 'close' });
  await refreshList();
  if (id === state.id) {
    const next = state.listing.find((info) => !info.exited);
    if (next) show(next.id);
    else openNew();
  }
}

async function refreshList() {
  try {
    const response = await fetch('/terminals', {
      headers: { Authorization: `Bearer ${state.token}` },
      cache: 'no-store',
    });
    if (response.status === 401) {
      askToken('the token was refused');
      return;
    }
    state.listing = await response.json();
  } catch (error) {
    setStatus(`cannot list terminals: ${error}`);
    return;
  }
  renderTabs();
}

function start() {
  const hashId = decodeURIComponent(location.hash.slice(1));
  refreshList();
  if (hashId) attach(hashId, 0);
  else openNew();
}

document.getElementById('new-terminal').onclick = openNew;
setInterval(() => state.token && refreshList(), LIST_REFRESH_MS);

if (state.token) start();
else askToken('enter the daemon token');
