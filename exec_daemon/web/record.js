// The session record's replay page (GET /record on the PTY port; exec_daemon/rpc/pty_server.py):
// a timeline of calls, guard decisions, edits, connections and terminal output, with filters
// (agent, tool, refusals); an entry's terminal output played back with xterm.js at real speed,
// 8x or at once; an edit's diff. The token comes as on the terminal page (?token=, then this
// origin's localStorage: SECURITY.md, "The web terminal's token").
import { Terminal } from '/assets/xterm.mjs';

const TOKEN_KEY = 'exec-daemon-token';
const KINDS_SHOWN = new Set(['call', 'result', 'cast', 'edit', 'egress', 'file_change', 'pty', 'dropped']);
const state = { token: takeToken(), entries: [], current: null, playback: null };
const el = (id) => document.getElementById(id);

function takeToken() {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    localStorage.setItem(TOKEN_KEY, fromUrl);
    url.searchParams.delete('token');
    history.replaceState(null, '', url);
    return fromUrl;
  }
  return localStorage.getItem(TOKEN_KEY);
}

function askToken(reason) {
  localStorage.removeItem(TOKEN_KEY);
  el('status').textContent = reason;
  const form = el('login');
  form.hidden = false;
  form.onsubmit = (event) => {
    event.preventDefault();
    state.token = el('token').value.trim();
    localStorage.setItem(TOKEN_KEY, state.token);
    form.hidden = true;
    load();
  };
}

async function get(path) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${state.token}` },
    cache: 'no-store',
  });
  if (response.status === 401) throw new Error('unauthorized');
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response;
}

async function load() {
  el('status').textContent = 'loading…';
  const entries = [];
  let since = 0;
  try {
    for (;;) {
      const page = await (await get(`/record/entries?since=${since}`)).json();
      entries.push(...page.entries);
      if (!page.more || page.entries.length === 0) break;
      since = page.entries[page.entries.length - 1].seq;
    }
  } catch (error) {
    if (String(error.message) === 'unauthorized') askToken('the token was refused');
    else el('status').textContent = `cannot read the record: ${error.message}`;
    return;
  }
  state.entries = entries.filter((entry) => KINDS_SHOWN.has(entry.kind));
  fillFilters();
  render();
  el('status').textContent = `${state.entries.length} entries`;
}

function fillFilters() {
  for (const [id, values] of [
    ['agent', state.entries.map((e) => e.agent)],
    ['tool', state.entries.map((e) => e.tool).filter(Boolean)],
  ]) {
    const select = el(id);
    const chosen = select.value;
    select.replaceChildren(new Option('all', ''));
    for (const value of [...new Set(values)].sort()) {
      select.append(new Option(value || '(terminals)', value));
    }
    select.value = chosen;
  }
}

function shown(entry) {
  const agent = el('agent').value;
  const tool = el('tool').value;
  if (el('agent').selectedIndex > 0 && entry.agent !== agent && entry.parent !== agent) return false;
  if (tool && entry.tool !== tool) return false;
  if (el('refusals').checked && !(entry.refused || (entry.kind === 'egress' && !entry.allowed))) {
    return false;
  }
  return true;
}

function summary(entry) {
  switch (entry.kind) {
    case 'call':
      return entry.args?.command ?? entry.args?.path ?? entry.args?.url ?? '';
    case 'result':
      return `${entry.outcome}${entry.refused_by ? ` by ${entry.refused_by}` : ''}${
        entry.reason ? `: ${entry.reason}` : ''
      } (${entry.ms} ms)`;
    case 'cast':
      return `output of ${entry.command ?? ''}`;
    case 'edit':
      return entry.path || 'a diff applied';
    case 'egress':
      return `${entry.allowed ? 'allowed' : 'refused'} ${entry.url ?? `${entry.host}:${entry.port}`}${
        entry.reason ? `: ${entry.reason}` : ''
      }`;
    case 'file_change':
      return entry.changes.map(([kind, path]) => `${kind} ${path}`).join(', ');
    case 'pty':
      return `terminal ${entry.terminal}`;
    case 'dropped':
      return `${entry.count} older entries dropped (cap)`;
    default:
      return '';
  }
}

function render() {
  const list = el('timeline');
  list.replaceChildren();
  const start = state.entries.length ? state.entries[0].t : 0;
  for (const entry of state.entries) {
    if (!shown(entry)) continue;
    const row = document.createElement('li');
    row.dataset.seq = entry.seq;
    row.className = `kind-${entry.kind}`;
    if (entry.refused || (entry.kind === 'egress' && !entry.allowed)) row.classList.add('refused');
    if (entry.parent) row.classList.add('sub');
    if (state.current === entry) row.classList.add('current');
    const cells = [
      `+${((entry.t - start) / 1e9).toFixed(2)}s`,
      entry.agent || '—',
      entry.kind,
      entry.tool ?? '',
      summary(entry),
    ];
    const classes = ['time', 'agent', 'kind', 'tool', 'summary'];
    cells.forEach((text, index) => {
      const cell = document.createElement('span');
      cell.className = classes[index];
      cell.textContent = text;
      cell.title = text;
      row.append(cell);
    });
    row.onclick = () => select(entry);
    list.append(row);
  }
}

async function text(value) {
  if (value && typeof value === 'object' && value.ref) {
    return (await get(`/record/blob/${encodeURIComponent(value.ref)}`)).text();
  }
  return value ?? '';
}

async function select(entry) {
  state.current = entry;
  stopPlayback();
  for (const row of el('timeline').children) {
    row.classList.toggle('current', Number(row.dataset.seq) === entry.seq);
  }
  el('detail-title').textContent = `#${entry.seq} ${entry.kind} ${entry.tool ?? ''} ${
    entry.agent ? `(agent ${entry.agent}${entry.parent ? `, subagent of ${entry.parent}` : ''})` : ''
  }`;
  el('player').hidden = el('diff').hidden = true;
  el('json').hidden = false;
  el('json').textContent = JSON.stringify(entry, null, 2);
  if (entry.kind === 'cast') {
    const [header, ...lines] = (await text(entry.asciicast)).trimEnd().split('\n');
    const events = lines.map((line) => JSON.parse(line)).map(([at, , data]) => [at, data]);
    play(JSON.parse(header), events);
  } else if (entry.kind === 'pty') {
    const events = state.entries
      .filter((e) => e.kind === 'pty' && e.terminal === entry.terminal)
      .flatMap((e) => e.events);
    play({ width: 80, height: 24 }, events);
  } else if (entry.kind === 'edit') {
    showDiff(await text(entry.diff));
  }
}

function showDiff(diff) {
  const pre = el('diff');
  pre.replaceChildren();
  for (const line of diff.split('\n')) {
    const span = document.createElement('span');
    if (line.startsWith('+') && !line.startsWith('+++')) span.className = 'add';
    else if (line.startsWith('-') && !line.startsWith('---')) span.className = 'del';
    else if (line.startsWith('@@')) span.className = 'hunk';
    span.textContent = `${line}\n`;
    pre.append(span);
  }
  pre.hidden = false;
  el('json').hidden = true;
}

function stopPlayback() {
  if (!state.playback) return;
  clearTimeout(state.playback.timer);
  state.playback.term.dispose();
  state.playback = null;
}

// Writes each [seconds, text] event when its time comes (divided by the speed; 0: at once).
function play(header, events) {
  const player = el('player');
  player.hidden = false;
  const term = new Terminal({
    cols: header.width || 80,
    rows: header.height || 24,
    convertEol: true,
    theme: { background: '#1e1e1e', foreground: '#d4d4d4' },
  });
  term.open(player);
  const speed = Number(el('speed').value);
  const playback = { term, timer: 0, done: false };
  state.playback = playback;
  window.execRecord.playback = playback;
  let index = 0;
  const started = performance.now();
  const first = events.length ? events[0][0] : 0;
  const step = () => {
    if (state.playback !== playback) return;
    const elapsed = (performance.now() - started) / 1000;
    while (index < events.length && (speed === 0 || (events[index][0] - first) / speed <= elapsed)) {
      term.write(events[index][1]);
      index += 1;
    }
    if (index < events.length) {
      const wait = ((events[index][0] - first) / speed - elapsed) * 1000;
      playback.timer = setTimeout(step, Math.max(0, Math.min(wait, 1000)));
    } else {
      term.write('', () => {
        playback.done = true;
      });
    }
  };
  step();
}

function screenText() {
  const playback = state.playback;
  if (!playback) return '';
  const buffer = playback.term.buffer.active;
  const rows = [];
  for (let y = 0; y < buffer.length; y += 1) rows.push(buffer.getLine(y)?.translateToString(true) ?? '');
  return rows.join('\n');
}

window.execRecord = { state, select, screenText, playback: null };
for (const id of ['agent', 'tool', 'refusals']) el(id).onchange = render;
el('reload').onclick = load;
if (state.token) load();
else askToken('enter the daemon token');
