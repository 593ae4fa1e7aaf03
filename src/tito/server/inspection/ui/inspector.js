// tito inspector: the session list, one session's tree, one turn's messages beside its tokens.
// Plain JavaScript, no dependencies, no build step. Everything is read from the read API (GET /sessions,
// /sessions/{id}, /sessions/{id}/turns/{node}); the API key, when the server has one, stays in this tab.
'use strict';

const KEY_STORE = 'tito.apiKey';
const POLL_MS = 2000;
const ROW_H = 22;          // px per token row (matches --row in the CSS)
const BOX_PAD = 8;         // px of padding + border around a token's text
const BOX_MIN = 14;
const BOX_MAX = 220;
const GAP = 2;
const TOKEN_FONT = '12px ui-monospace, Menlo, Consolas, monospace';  // as .tk in the CSS
const OVERSCAN = 8;        // rows rendered above and below the visible ones
const API_BASE = location.pathname.replace(/\/ui\/?$/, '');

const view = document.getElementById('view');
const crumbs = document.getElementById('crumbs');
const liveLabel = document.getElementById('live');
const tip = document.getElementById('token-tip');
let pollTimer = null;
let routeVersion = 0;      // a view rendered for an older route never writes into the page

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path) {
  const headers = {};
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers.Authorization = 'Bearer ' + key;
  const response = await fetch(API_BASE + path, { headers, cache: 'no-store' });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (response.status === 401) askForKey();
  if (!response.ok) {
    const message = body && body.error ? body.error.type + ': ' + body.error.message : response.statusText;
    throw new ApiError(response.status, message);
  }
  return body;
}

function askForKey() {
  const dialog = document.getElementById('key-dialog');
  if (!dialog.open) dialog.showModal();
}

document.getElementById('key-form').addEventListener('submit', () => {
  sessionStorage.setItem(KEY_STORE, document.getElementById('key-input').value);
  route();
});

const esc = (value) => String(value ?? '').replace(/[&<>"']/g, (c) => (
  { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

function ago(seconds) {
  const d = Math.max(0, Date.now() / 1000 - seconds);
  if (d < 60) return Math.round(d) + ' s ago';
  if (d < 3600) return Math.round(d / 60) + ' min ago';
  if (d < 86400) return (d / 3600).toFixed(1) + ' h ago';
  return new Date(seconds * 1000).toISOString().slice(0, 16).replace('T', ' ');
}

function setCrumbs(parts) {
  crumbs.innerHTML = parts.map(([label, href]) => href ? `<a href="${href}">${esc(label)}</a>` : esc(label)).join(' / ');
}

function poll(fn) {
  clearInterval(pollTimer);
  pollTimer = null;
  liveLabel.textContent = '';
  if (!fn) return;
  liveLabel.textContent = '● live';
  pollTimer = setInterval(() => { if (!document.hidden) fn(); }, POLL_MS);
}

function showError(error) {
  view.className = '';
  view.innerHTML = `<p class="error">${esc(error.message)}</p>`;
}

// ---------------------------------------------------------------- routing
function route() {
  const version = ++routeVersion;
  tip.hidden = true;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  let rendering;
  if (parts[0] === 'sessions' && parts[1] && parts[2] === 'turns' && parts[3] !== undefined) {
    rendering = showTurn(parts[1], Number(parts[3]), version);
  } else if (parts[0] === 'sessions' && parts[1]) {
    rendering = showSession(parts[1], version);
  } else {
    rendering = showList(version);
  }
  rendering.catch((error) => { if (version === routeVersion) { poll(null); showError(error); } });
}
window.addEventListener('hashchange', route);

// ---------------------------------------------------------------- the session list
const listState = { filter: '', status: '', kind: '', sort: 'last_activity', asc: false, rows: [] };
const COLUMNS = [
  ['session_id', 'session', false], ['status', 'status', false], ['trajectory', 'kind', false],
  ['turns', 'turns', true], ['conversations', 'conversations', true], ['tokens', 'tokens', true],
  ['sampled_tokens', 'sampled', true],
  ['reward', 'reward', true], ['samples_taken', 'samples taken', true], ['last_activity', 'last activity', true],
];

async function showList(version) {
  setCrumbs([['sessions']]);
  view.className = '';
  view.innerHTML = `
    <div class="toolbar">
      <input id="filter" type="search" placeholder="filter by id, status, kind" value="${esc(listState.filter)}">
      <select id="status-filter">${['', 'live', 'generating', 'deleted', 'expired', 'exported'].map((s) =>
        `<option value="${s}" ${s === listState.status ? 'selected' : ''}>${s || 'any status'}</option>`).join('')}</select>
      <select id="kind-filter">${['', 'linear', 'tree'].map((s) =>
        `<option value="${s}" ${s === listState.kind ? 'selected' : ''}>${s || 'any kind'}</option>`).join('')}</select>
      <span id="count" class="muted"></span>
    </div>
    <table class="grid" id="sessions"><thead><tr>${COLUMNS.map(([key, label, num]) =>
      `<th data-key="${key}" class="${num ? 'num' : ''}">${label}</th>`).join('')}</tr></thead><tbody></tbody></table>`;
  document.getElementById('filter').addEventListener('input', (e) => { listState.filter = e.target.value; drawRows(); });
  document.getElementById('status-filter').addEventListener('change', (e) => { listState.status = e.target.value; drawRows(); });
  document.getElementById('kind-filter').addEventListener('change', (e) => { listState.kind = e.target.value; drawRows(); });
  view.querySelector('thead').addEventListener('click', (e) => {
    const key = e.target.dataset.key;
    if (!key) return;
    listState.asc = listState.sort === key ? !listState.asc : !COLUMNS.find((c) => c[0] === key)[2];
    listState.sort = key;
    drawRows();
  });
  view.querySelector('tbody').addEventListener('click', (e) => {
    const row = e.target.closest('tr');
    if (row) location.hash = '#/sessions/' + encodeURIComponent(row.dataset.id);
  });
  const refresh = async () => {
    const body = await api('/sessions');
    if (version !== routeVersion) return;
    listState.rows = body.sessions;
    drawRows();
  };
  await refresh();
  poll(() => refresh().catch(() => {}));
}

function drawRows() {
  const words = listState.filter.toLowerCase().split(/\s+/).filter(Boolean);
  const rows = listState.rows.filter((row) => {
    if (listState.status && row.status !== listState.status) return false;
    if (listState.kind && row.trajectory !== listState.kind) return false;
    const text = `${row.session_id} ${row.status} ${row.trajectory}`.toLowerCase();
    return words.every((word) => text.includes(word));
  });
  const key = listState.sort;
  const sign = listState.asc ? 1 : -1;
  rows.sort((a, b) => {
    const x = a[key] ?? -Infinity, y = b[key] ?? -Infinity;
    return (x < y ? -1 : x > y ? 1 : 0) * sign;
  });
  view.querySelectorAll('th').forEach((th) => {
    th.classList.toggle('sorted', th.dataset.key === key);
    th.classList.toggle('asc', th.dataset.key === key && listState.asc);
  });
  view.querySelector('tbody').innerHTML = rows.map((row) => `
    <tr data-id="${esc(row.session_id)}">
      <td class="mono">${esc(row.session_id)}</td>
      <td><span class="badge ${esc(row.status)}">${esc(row.status)}</span></td>
      <td>${esc(row.trajectory)}</td>
      <td class="num">${row.turns}${row.superseded_turns ? ` <span class="muted">+${row.superseded_turns}</span>` : ''}</td>
      <td class="num">${row.conversations}</td>
      <td class="num">${row.tokens}</td>
      <td class="num">${row.sampled_tokens}</td>
      <td class="num">${row.reward ?? '<span class="muted">–</span>'}</td>
      <td class="num">${row.samples_taken}</td>
      <td class="num" title="${new Date(row.last_activity * 1000).toISOString()}">${ago(row.last_activity)}</td>
    </tr>`).join('') || `<tr><td colspan="${COLUMNS.length}" class="muted">no sessions</td></tr>`;
  document.getElementById('count').textContent = `${rows.length} of ${listState.rows.length} sessions`;
}

// ---------------------------------------------------------------- one session's tree
async function showSession(sessionId, version) {
  setCrumbs([['sessions', '#/'], [sessionId]]);
  const draw = (session) => {
    view.className = '';
    view.innerHTML = sessionHtml(session);
    view.querySelector('.tree').addEventListener('click', (e) => {
      const row = e.target.closest('.node');
      if (row) location.hash = `#/sessions/${encodeURIComponent(sessionId)}/turns/${row.dataset.node}`;
    });
  };
  let session = await api('/sessions/' + encodeURIComponent(sessionId) + '?touch=false');
  if (version !== routeVersion) return;
  draw(session);
  const isLive = (s) => s.status === 'live' || s.status === 'generating';
  poll(isLive(session) ? async () => {
    const fresh = await api('/sessions/' + encodeURIComponent(sessionId) + '?touch=false').catch(() => null);
    if (!fresh || version !== routeVersion) return;
    if (JSON.stringify(fresh.tree) !== JSON.stringify(session.tree) || fresh.status !== session.status) draw(fresh);
    session = fresh;
    if (!isLive(fresh)) poll(null);
  } : null);
}

function sessionHtml(session) {
  const tree = session.tree;
  const summary = session.summary;
  const byId = new Map(tree.nodes.map((node) => [node.node_id, node]));
  const order = [];
  const visit = (id, indent) => {
    const node = byId.get(id);
    order.push([node, indent]);
    const branching = node.children.length > 1;
    node.children.forEach((child) => visit(child, indent + (branching ? 1 : 0)));
  };
  tree.roots.forEach((root) => visit(root, tree.roots.length > 1 ? 1 : 0));
  const rows = order.map(([node, indent], position) => {
    const above = position > 0 ? order[position - 1][0].node_id : null;
    const from = `<span class="from">${node.parent_id !== null && node.parent_id !== above ? '↳ #' + node.parent_id : ''}</span>`;
    const weights = node.weight_versions && node.weight_versions.length ? node.weight_versions.join(',') : '–';
    const engine = node.timings && node.timings.engine != null ? `${(node.timings.engine * 1000).toFixed(0)} ms` : '–';
    const roles = `${node.appended_roles.join(' + ') || '(none)'} → ${node.role}`;
    return `
      <div class="node ${node.fate} ${node.active ? 'active' : ''}" data-node="${node.node_id}" data-fate="${node.fate}"
           title="weight version ${esc(weights)} · engine ${engine} · committed ${new Date(node.committed_at * 1000).toISOString()}">
        <span class="indent" style="width:${indent * 22}px"></span>
        <span class="id">#${node.node_id}</span>${from}
        ${node.conversation_kind ? `<span class="badge" title="conversation">${esc(node.conversation)} ${esc(node.conversation_kind)}</span>` : ''}
        <span class="roles">${esc(roles)}</span>
        <span class="badge">${esc(node.finish_reason)}</span>
        <span class="badge ${node.fate}">${node.fate}</span>
        ${node.kept_leaf ? '<span class="badge leaf">kept leaf</span>' : ''}
        ${node.invalid_tool_calls ? `<span class="badge bad">${node.invalid_tool_calls} invalid call(s)</span>` : ''}
        <span class="muted mono">${node.prompt_ids}+${node.sampled_ids} ids</span>
        <span class="muted">w ${esc(weights)}</span>
        <span class="muted">${engine}</span>
        <span class="preview">${esc(node.preview)}</span>
      </div>`;
  }).join('');
  return `
    <h2 class="mono">${esc(session.session_id)}</h2>
    <div class="facts">
      <span><b>status</b> <span class="badge ${esc(session.status)}">${esc(session.status)}</span></span>
      <span><b>kind</b> ${esc(summary.trajectory)}</span>
      <span><b>turns</b> ${summary.turns}${summary.superseded_turns ? ` (+${summary.superseded_turns} superseded)` : ''}</span>
      <span><b>conversations</b> ${(session.conversations || []).map((c) => `${esc(c.id)} ${esc(c.kind)}${c.parent ? ' ↳ ' + esc(c.parent) : ''}`).join(', ') || '–'}</span>
      <span><b>tokens</b> ${summary.tokens}</span>
      <span><b>sampled</b> ${summary.sampled_tokens}</span>
      <span><b>reward</b> ${summary.reward ?? '–'}</span>
      <span><b>samples taken</b> ${summary.samples_taken}</span>
      <span><b>last activity</b> ${ago(summary.last_activity)}</span>
    </div>
    ${tree.picker_error ? `<p class="error">sample picker: ${esc(tree.picker_error)}</p>` : ''}
    <div class="legend">
      <span><span class="badge kept">kept</span> trained in a sample</span>
      <span><span class="badge dropped">dropped</span> on no kept leaf's path (the picker left it out)</span>
      <span><span class="badge superseded">superseded</span> replaced by a linear retry (journal only)</span>
      <span><span class="badge leaf">kept leaf</span> becomes a sample</span>
      <span>blue edge: the active path</span>
    </div>
    <div class="tree">${rows || '<p class="muted" style="padding:0 10px">no committed turns yet</p>'}</div>`;
}

// ---------------------------------------------------------------- one turn: messages beside tokens
const KIND_PROMPT = 0, KIND_SAMPLED = 1, KIND_ELSEWHERE = 2;
const FLAG_JUNCTION = 4, FLAG_AFTER_DROP = 8;
let turnState = null;
const measureContext = document.createElement('canvas').getContext('2d');

async function showTurn(sessionId, nodeId, version) {
  poll(null);
  const started = performance.now();
  setCrumbs([['sessions', '#/'], [sessionId, '#/sessions/' + encodeURIComponent(sessionId)], ['node ' + nodeId]]);
  const turn = await api(`/sessions/${encodeURIComponent(sessionId)}/turns/${nodeId}`);
  if (version !== routeVersion) return;
  view.className = 'turn';
  view.innerHTML = turnHtml(turn);
  turnState = prepareTokens(turn);
  layoutTokens();
  renderRows();
  const pane = document.getElementById('tokens');
  pane.addEventListener('scroll', () => requestAnimationFrame(renderRows), { passive: true });
  pane.addEventListener('mouseover', hoverToken);
  pane.addEventListener('mouseleave', () => { tip.hidden = true; });
  view.querySelector('.messages').addEventListener('click', (e) => {
    const box = e.target.closest('.msg');
    if (box) scrollToToken(Number(box.dataset.start));
  });
  window.__inspector = { renderedTurn: { tokens: turn.tokens.ids.length, ms: performance.now() - started } };
}

function turnHtml(turn) {
  const meta = turn.metadata || {};
  const timings = meta.timings || {};
  const attempts = turn.tool_call_attempts || [];
  const attemptRows = attempts.map((a) => `
    <tr data-status="${esc(a.status)}"><td>${a.index}</td>
      <td><span class="badge ${a.status === 'ok' || a.status === 'in_message' ? 'ok' : 'bad'}">${esc(a.status)}</span></td>
      <td class="mono">${esc(a.name ?? '–')}</td><td class="mono">${esc(a.arguments ?? a.raw)}</td>
      <td>${esc(a.detail)}</td></tr>`).join('');
  const messages = turn.messages.map((m) => {
    const msg = m.message;
    const calls = (msg.tool_calls || []).map((c) =>
      `→ ${c.function ? c.function.name : '?'}(${c.function ? c.function.arguments : ''})`).join('\n');
    const text = [msg.reasoning_content ? '[reasoning] ' + msg.reasoning_content : '',
      typeof msg.content === 'string' ? msg.content : msg.content == null ? '' : JSON.stringify(msg.content), calls]
      .filter(Boolean).join('\n');
    return `<div class="msg ${esc(msg.role)}" data-start="${m.tokens[0]}" title="tokens ${m.tokens[0]}–${m.tokens[1]}">
      <header><span class="role">${esc(msg.role)}</span><span class="muted">node #${m.node_id}</span>
      <span class="muted">tokens ${m.tokens[0]}–${m.tokens[1]}</span></header><pre>${esc(text)}</pre></div>`;
  }).join('');
  const sampled = turn.tokens.loss_mask.reduce((sum, m) => sum + m, 0);
  return `
    <div class="facts">
      <span><b>node</b> #${turn.node_id}</span>
      <span><b>path</b> ${turn.path.map((n) => '#' + n).join(' → ')}</span>
      <span><b>finish</b> ${esc(turn.finish_reason)}</span>
      <span><b>weight versions</b> ${esc((meta.weight_versions || []).join(', ') || '–')}</span>
      <span><b>engine</b> ${timings.engine != null ? (timings.engine * 1000).toFixed(1) + ' ms' : '–'}</span>
      <span><b>first token</b> ${timings.first_token != null ? (timings.first_token * 1000).toFixed(1) + ' ms' : '–'}</span>
      <span><b>tokens</b> <span id="token-count">${turn.tokens.ids.length}</span> (${sampled} with loss mask 1)</span>
      <span><b>tokenizer</b> ${turn.tokenizer ? esc(turn.tokenizer) : '<span class="muted">none: ids only (tito inspect --family F)</span>'}</span>
    </div>
    ${attempts.length ? `<table class="grid attempts" id="attempts"><thead><tr><th>#</th><th>parse status</th><th>name</th>
      <th>arguments / raw</th><th>detail</th></tr></thead><tbody>${attemptRows}</tbody></table>` : ''}
    <div class="legend">
      <span><span class="tk p">&nbsp;</span> prompt (mask 0)</span>
      <span><span class="tk s" style="background:${sampledColour(0)}">&nbsp;</span> sampled (mask 1), darker = lower logprob
        <span class="scale"></span> p 0 → 1</span>
      <span><span class="tk o">&nbsp;</span> sampled, trained in another sample (mask 0 here)</span>
      <span><span class="tk p j">&nbsp;</span> junction ids tito inserted</span>
      <span><span class="tk p d">&nbsp;</span> after ids dropped at a junction</span>
    </div>
    <div class="panes">
      <section class="pane"><h3>messages (${turn.messages.length})</h3><div class="messages">${messages}</div></section>
      <section class="pane"><h3>tokens</h3><div id="tokens"><div class="rows"></div></div></section>
    </div>`;
}

function sampledColour(logprob) {
  const p = Math.exp(Math.min(0, logprob));
  return `hsl(140, 60%, ${(43 + 45 * p).toFixed(1)}%)`;
}

function displayText(piece) {
  return piece.replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/\r/g, '␍');
}

function prepareTokens(turn) {
  const tokens = turn.tokens;
  const n = tokens.ids.length;
  const kinds = new Uint8Array(n);
  const nodeOf = new Int32Array(n);
  const breaks = new Uint8Array(n + 1);  // 1: this token starts a new row
  for (const span of turn.spans) {
    for (let i = span.prompt_start; i < span.end && i < n; i++) {
      nodeOf[i] = span.node_id;
      if (i >= span.sampled_start) kinds[i] = tokens.loss_mask[i] ? KIND_SAMPLED : KIND_ELSEWHERE;
      else if (i < span.junction_end) kinds[i] |= FLAG_JUNCTION;
    }
    if (span.dropped_ids > 0 && span.prompt_start < n) kinds[span.prompt_start] |= FLAG_AFTER_DROP;
    breaks[span.prompt_start] = 1;
    breaks[Math.min(span.sampled_start, n)] = 1;
  }
  const labels = new Array(n);
  for (let i = 0; i < n; i++) {
    const piece = tokens.pieces ? tokens.pieces[i] : String(tokens.ids[i]);
    labels[i] = displayText(piece);
    if (tokens.pieces && piece.endsWith('\n')) breaks[i + 1] = 1;
  }
  return { turn, n, kinds, nodeOf, breaks, labels, widths: null, xs: null, rowStarts: null, lastFirst: -1, lastLast: -1 };
}

function layoutTokens() {
  const state = turnState;
  const pane = document.getElementById('tokens');
  const avail = Math.max(200, pane.clientWidth - 12);
  measureContext.font = TOKEN_FONT;
  const cache = new Map();
  const widths = new Float32Array(state.n);
  const xs = new Float32Array(state.n);
  const rowStarts = [0];
  let x = 0;
  for (let i = 0; i < state.n; i++) {
    const label = state.labels[i];
    let w = cache.get(label);
    if (w === undefined) {
      w = Math.min(BOX_MAX, Math.max(BOX_MIN, Math.ceil(measureContext.measureText(label).width) + BOX_PAD));
      cache.set(label, w);
    }
    if (i > 0 && (state.breaks[i] || x + w > avail)) { rowStarts.push(i); x = 0; }
    widths[i] = w;
    xs[i] = x;
    x += w + GAP;
  }
  rowStarts.push(state.n);
  state.widths = widths; state.xs = xs; state.rowStarts = Int32Array.from(rowStarts);
  state.lastFirst = state.lastLast = -1;
  pane.querySelector('.rows').style.height = ((rowStarts.length - 1) * ROW_H) + 'px';
}

function renderRows() {
  const state = turnState;
  const pane = document.getElementById('tokens');
  if (!state || !pane) return;
  const rowCount = state.rowStarts.length - 1;
  const first = Math.max(0, Math.floor(pane.scrollTop / ROW_H) - OVERSCAN);
  const last = Math.min(rowCount, Math.ceil((pane.scrollTop + pane.clientHeight) / ROW_H) + OVERSCAN);
  if (first === state.lastFirst && last === state.lastLast) return;
  state.lastFirst = first; state.lastLast = last;
  const { ids, logprobs } = state.turn.tokens;
  const html = [];
  for (let r = first; r < last; r++) {
    html.push(`<div class="trow" style="top:${r * ROW_H}px">`);
    for (let i = state.rowStarts[r]; i < state.rowStarts[r + 1]; i++) {
      const kind = state.kinds[i];
      const base = kind & 3;
      let cls = base === KIND_PROMPT ? 'tk p' : base === KIND_SAMPLED ? 'tk s' : 'tk o';
      if (kind & FLAG_JUNCTION) cls += ' j';
      if (kind & FLAG_AFTER_DROP) cls += ' d';
      const colour = base === KIND_SAMPLED ? `;background:${sampledColour(logprobs[i])}` : '';
      html.push(`<span class="${cls}" data-i="${i}" data-id="${ids[i]}" data-mask="${base === KIND_SAMPLED ? 1 : 0}" ` +
        `style="left:${state.xs[i]}px;width:${state.widths[i]}px${colour}">${esc(state.labels[i])}</span>`);
    }
    html.push('</div>');
  }
  pane.querySelector('.rows').innerHTML = html.join('');
}

function hoverToken(event) {
  const box = event.target.closest('.tk');
  if (!box || !turnState) return;
  const i = Number(box.dataset.i);
  const { ids, logprobs, loss_mask: mask, pieces } = turnState.turn.tokens;
  const kind = turnState.kinds[i];
  const what = (kind & 3) === KIND_PROMPT ? 'prompt' : (kind & 3) === KIND_SAMPLED ? 'sampled' : 'sampled, trained in another sample';
  const extra = (kind & FLAG_JUNCTION ? '\njunction id inserted by tito' : '') +
    (kind & FLAG_AFTER_DROP ? '\nfollows ids dropped at the junction' : '');
  const lp = logprobs[i];
  tip.textContent = `token ${i} · id ${ids[i]}\ntext ${pieces ? JSON.stringify(pieces[i]) : '(no tokenizer)'}\n` +
    `logprob ${(kind & 3) === KIND_PROMPT ? '– (prompt)' : lp.toFixed(4) + ` (p ${Math.exp(lp).toFixed(3)})`}\n` +
    `loss mask ${mask[i]} · ${what} · node #${turnState.nodeOf[i]}${extra}`;
  tip.dataset.tokenId = String(ids[i]);
  tip.dataset.index = String(i);
  tip.hidden = false;
  const rect = box.getBoundingClientRect();
  tip.style.left = Math.min(window.innerWidth - 430, rect.left) + 'px';
  tip.style.top = (rect.bottom + 6 + 110 > window.innerHeight ? rect.top - 110 : rect.bottom + 6) + 'px';
}

function scrollToToken(index) {
  const state = turnState;
  const rows = state.rowStarts;
  let lo = 0, hi = rows.length - 2;
  while (lo < hi) {  // the last row starting at or before `index`
    const mid = (lo + hi + 1) >> 1;
    if (rows[mid] <= index) lo = mid; else hi = mid - 1;
  }
  document.getElementById('tokens').scrollTop = lo * ROW_H;
  renderRows();
}

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (turnState && document.getElementById('tokens')) { layoutTokens(); renderRows(); } }, 120);
});

route();
