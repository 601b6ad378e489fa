// Shared pieces of the dashboard's pages: the API client (bearer token from session
// storage, renewed for provider sign-ins), DOM building without innerHTML (names come from users), formatting, tables,
// pagers and charts.

export const session = {
  get token() { return sessionStorage.getItem('gantry.token') || ''; },
  set token(t) { if (t) sessionStorage.setItem('gantry.token', t); else sessionStorage.removeItem('gantry.token'); },
  who: null, // {user, team, role} from /v1/whoami
  get admin() { return this.who && this.who.role === 'admin'; },
  // Signed in through the identity provider: the session's refresh token is an HttpOnly
  // cookie the page never sees; a new access token comes from /v1/auth/refresh.
  get sso() { return sessionStorage.getItem('gantry.sso') === '1'; },
  set sso(on) { if (on) sessionStorage.setItem('gantry.sso', '1'); else sessionStorage.removeItem('gantry.sso'); },
  refusal: '', // why the last refresh was refused
  // The team a member of several acts for (sent as X-Gantry-Team); '' : their default.
  get team() { return sessionStorage.getItem('gantry.team') || ''; },
  set team(t) { if (t) sessionStorage.setItem('gantry.team', t); else sessionStorage.removeItem('gantry.team'); },
};

// A new access token for the provider sign-in this browser holds (its cookie); false when
// there is none any more (signed out, revoked, or no longer in a mapped group). The calls
// of a page that all found the token expired share one refresh; one that crossed another
// tab's refresh (409) asks again with the cookie that tab left.
let refreshing = null;
export function refreshSession() {
  if (!refreshing) refreshing = refreshOnce(true).finally(() => { refreshing = null; });
  return refreshing;
}

async function refreshOnce(mayRetry) {
  const res = await fetch('/v1/auth/refresh', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
  const data = await res.json().catch(() => null);
  if (res.status === 409 && mayRetry) {
    await new Promise((resolve) => { setTimeout(resolve, 500); });
    return refreshOnce(false);
  }
  if (!res.ok) {
    const why = (data && data.error && data.error.message) || '';
    session.refusal = why.startsWith('no refresh token') ? '' : why; // never signed in here: nothing to say
    session.token = '';
    session.sso = false;
    return false;
  }
  session.token = data.access_token;
  session.sso = true;
  return true;
}

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message ? `${e.message}${e.field ? ` (${e.field})` : ''}` : `HTTP ${status}`);
    this.status = status;
    this.field = e.field;
  }
}

// Calls the REST API with the signed-in token; JSON answers are parsed, text returned as is.
export async function api(path, { method = 'GET', body, text = false } = {}, retried = false) {
  const headers = { Authorization: `Bearer ${session.token}` };
  if (session.team) headers['X-Gantry-Team'] = session.team;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  // An expired access token of a provider sign-in: renewed once, then the call again.
  if (res.status === 401 && session.sso && !retried && await refreshSession()) return api(path, { method, body, text }, true);
  if (res.status === 401) {
    session.token = '';
    window.dispatchEvent(new Event('gantry:signed-out'));
  }
  if (text && res.ok) return { text: await res.text(), headers: res.headers };
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// h('a', {href: '#/x', class: 'y'}, 'text', child): an element; strings become text nodes.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

export const num = (v, digits = 2) => (v === null || v === undefined || Number.isNaN(v) ? '–'
  : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 }));
// Amounts and hours under 1 keep four decimals, as the bill does: 0.0040 GPU-hours, not 0.
export const money = (v, currency = 'USD') => (v === null || v === undefined ? '–'
  : Number(v).toLocaleString('en-US', { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: Math.abs(v) < 1 && v !== 0 ? 4 : 2 }));
export const hours = (v) => (v === null || v === undefined ? '–'
  : Number(v).toLocaleString('en-US', { minimumFractionDigits: Math.abs(v) < 1 && v !== 0 ? 4 : 2, maximumFractionDigits: Math.abs(v) < 1 ? 4 : 2 }));
export function duration(s) {
  if (s === null || s === undefined || s < 0) return '–';
  s = Math.round(s);
  const d = Math.floor(s / 86400), hr = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}
export function when(iso) {
  if (!iso) return '–';
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? iso : t.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}
export const state = (s) => h('span', { class: `state state-${s}` }, s);
export const jobLink = (id, label = id) => h('a', { href: `#/jobs/${encodeURIComponent(id)}` }, label);

// Items of one array side by side with the same `key` (state, reason) become one row, as
// the CLI shows them: row.tasks lists their task ids (empty for a job of no array).
export function groupTasks(items, key) {
  const rows = [];
  for (const it of items) {
    const last = rows[rows.length - 1];
    const inArray = it.array_job_id !== undefined;
    if (inArray && last && last.array_job_id === it.array_job_id && key(last) === key(it)) {
      last.tasks.push(it.array_task_id);
    } else {
      rows.push({ ...it, tasks: inArray ? [it.array_task_id] : [] });
    }
  }
  return rows;
}

// A row's id as people know it: 12 (a job), 12_3 (one task), 12_[1-5,7] (several).
export function rowId(row) {
  if (!row.tasks || !row.tasks.length) return row.id;
  if (row.tasks.length === 1) return `${row.array_job_id}_${row.tasks[0]}`;
  const sorted = [...row.tasks].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j += 1;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return `${row.array_job_id}_[${parts.join(',')}]`;
}

// A table from column specs: [{title, num?, cell: row => node|string}].
export function table(columns, rows, { empty = 'Nothing here.', caption } = {}) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    caption ? h('caption', { class: 'sr-only' }, caption) : null,
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.title)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: c.num ? 'num' : null }, c.cell(r)))))));
}

// Prev/next over a list the API pages with limit and offset.
export function pager(total, offset, limit, go) {
  const last = Math.min(offset + limit, total);
  return h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: offset <= 0, onclick: () => go(Math.max(0, offset - limit)) }, '← Previous'),
    h('span', {}, total ? `${offset + 1}–${last} of ${total}` : '0 of 0'),
    h('button', { type: 'button', disabled: last >= total, onclick: () => go(offset + limit) }, 'Next →'));
}

// A bar for a value against a guarantee (the tick) and a maximum (the bar's end).
export function quotaBar(used, guaranteed, max) {
  // Without a limit the bar ends a quarter past the larger of the guarantee and the use.
  const end = max ? Math.max(max, used || 0) : Math.max(guaranteed || 0, used || 0, 1) * 1.25;
  const bar = h('div', { class: 'bar', role: 'img', 'aria-label': `${num(used)} of guarantee ${num(guaranteed)}` },
    h('span', { class: used > guaranteed ? 'over' : null, style: { width: `${(100 * used) / end}%` } }));
  if (guaranteed > 0) bar.append(h('i', { style: { left: `${(100 * guaranteed) / end}%` } }));
  return bar;
}

// A time-series chart (uPlot): series [{label, values, stroke}] over times `ts` (seconds);
// `counts`: the y axis counts things (jobs), so its ticks are whole numbers from 0.
export function lineChart(title, ts, series, { height = 220, yLabel = '', xRange, counts = false } = {}) {
  const box = h('figure', { class: 'chart' }, h('figcaption', {}, title));
  const draw = () => {
    const width = Math.max(320, box.clientWidth - 16);
    // eslint-disable-next-line no-undef
    new uPlot({
      width, height,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, spanGaps: true }))],
      axes: [{}, counts
        ? { label: yLabel, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000], values: (u, ticks) => ticks.map((t) => String(Math.round(t))) }
        : { label: yLabel }],
      scales: {
        x: { time: true, range: xRange ? () => xRange : undefined },
        ...(counts ? { y: { range: (u, min, max) => [0, Math.max(1, Math.ceil(max))] } } : {}),
      },
    }, [ts, ...series.map((s) => s.values)], box);
  };
  requestAnimationFrame(draw);
  return box;
}

// Bars of `values` per `labels` (uPlot bars on an ordinal x axis).
export function barChart(title, labels, values, { height = 240, yLabel = '' } = {}) {
  const box = h('figure', { class: 'chart' }, h('figcaption', {}, title));
  const draw = () => {
    const width = Math.max(320, box.clientWidth - 16);
    const xs = labels.map((_, i) => i);
    // eslint-disable-next-line no-undef
    const bars = uPlot.paths.bars({ size: [0.6, 60] });
    // eslint-disable-next-line no-undef
    new uPlot({
      width, height,
      scales: { x: { time: false, range: [-0.5, labels.length - 0.5] } },
      axes: [{ values: (u, ticks) => ticks.map((t) => labels[t] ?? ''), splits: () => xs }, { label: yLabel }],
      series: [{}, { label: yLabel, fill: '#6b8fd6', stroke: '#1f5fbf', paths: bars, points: { show: false } }],
      legend: { show: false },
    }, [xs, values], box);
  };
  requestAnimationFrame(draw);
  return box;
}

// Fetches with the token and saves the answer as a file (links cannot carry the header).
export async function download(path, filename) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${session.token}` } });
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
