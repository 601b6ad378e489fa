// One job: its spec, placement, cost and GPU use, its named ports (opened through the
// server's port proxy), the events timeline, a live tail of its log (rank and stream), and
// cancel/hold/release for its team and admins.
import { api, h, num, money, when, state, session, table, ApiError } from '../lib.js';

const terminal = new Set(['succeeded', 'failed', 'cancelled']);

function specList(job) {
  const s = job.spec || {};
  const rows = [
    ['Name', job.name], ['User', job.user], ['Team', job.team], ['Project', job.project || '–'],
    ['Priority class', job.priority], ['State', state(job.state)], ['Reason', job.reason || '–'],
    ['GPUs', `${num(s.gpus)}${s.gpu_fraction ? ` × ${s.gpu_fraction}` : ''} ${job.sharing || s.sharing || ''}`],
    ['GPU types', (s.gpu_types || []).join(', ') || 'any'], ['Nodes', String(s.nodes || 1)],
    ['Command', s.command || (s.hold_gpus ? `GPU hold (${s.hold_gpus})` : '–')],
    ['Container image', s.container_image || '–'],
    ['Time limit', s.time_limit_s ? `${num(s.time_limit_s / 3600, 2)} h` : '–'],
    ['Submitted', when(job.submitted_at)], ['Started', when(job.started_at)], ['Ended', when(job.ended_at)],
    ['Runs', String(job.runs)], ['Evictions', String(job.evictions)], ['Exit code', job.exit_code ?? '–'],
    ['Cost so far', money(job.cost, job.currency)],
  ];
  return h('dl', { class: 'spec' }, rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function placementTable(job) {
  const rows = (job.placement || []).flatMap((p, rank) => p.gpus.map((g) => ({ rank, node: p.node, type: p.gpu_type, ...g })));
  return table([
    { title: 'Rank', num: true, cell: (r) => String(r.rank) },
    { title: 'Node', cell: (r) => r.node },
    { title: 'GPU', num: true, cell: (r) => String(r.index) },
    { title: 'Type', cell: (r) => r.type },
    { title: 'Share', num: true, cell: (r) => num(r.share) },
    { title: 'UUID', cell: (r) => r.uuid },
  ], rows, { empty: 'Not placed now.', caption: 'Placement' });
}

function gpuUse(job) {
  return table([
    { title: 'Node', cell: (u) => u.node }, { title: 'GPU', num: true, cell: (u) => String(u.gpu) },
    { title: 'Share', num: true, cell: (u) => num(u.share) },
    { title: 'SM %', num: true, cell: (u) => num(u.sm_util_pct, 1) },
    { title: 'Of its share %', num: true, cell: (u) => num(u.share_used_pct, 1) },
    { title: 'Memory MiB', num: true, cell: (u) => num(u.memory_used_mib, 0) },
  ], job.gpu_use || [], { empty: 'No readings (not running, or the node reports none).', caption: 'GPU use' });
}

function timeline(events) {
  return h('ol', { class: 'timeline' }, events.map((e) => {
    const d = e.detail && typeof e.detail === 'object' ? Object.entries(e.detail)
      .filter(([, v]) => v !== '' && v !== null && typeof v !== 'object').map(([k, v]) => `${k} ${v}`).join(', ') : '';
    return h('li', { 'data-kind': e.kind }, h('time', { datetime: e.at }, when(e.at)), h('strong', {}, e.kind), d ? ` — ${d}` : '');
  }));
}

// Who may open a job's ports: as for a session in it, its owner, its team's admins, admins.
function mayOpen(job) {
  const who = session.who || {};
  return job.user === who.user || session.admin || (who.role === 'team-admin' && who.team === job.team);
}

// Opens a port of the job through the port proxy: a one-minute ticket from the API, which
// the proxy (another origin: the job's pages never see this page's token) turns into a
// cookie for that port alone.
async function openPort(job, name, sameTab, ctx) {
  try {
    const t = await api(`/v1/jobs/${encodeURIComponent(job.id)}/ports/${encodeURIComponent(name)}/ticket`, { method: 'POST' });
    if (sameTab) location.assign(t.url); else window.open(t.url, '_blank', 'noopener');
    ctx.showError(null);
  } catch (e) { ctx.showError(e); }
}

function portsView(job, ctx) {
  const named = (job.ports || []).filter((p) => p.name !== 'master');
  if (!named.length) return h('p', { class: 'muted' }, job.state === 'running' ? 'No named ports.' : 'Ports open while it runs.');
  return table([
    { title: 'Port', cell: (p) => p.name },
    { title: 'Through the server', cell: (p) => p.proxy_url || '–' },
    { title: 'On the node', cell: (p) => p.url },
    { title: '', cell: (p) => (p.proxy_url && mayOpen(job) && job.state === 'running'
      ? h('button', { type: 'button', id: `port-open-${p.name}`, onclick: () => openPort(job, p.name, false, ctx) }, `Open ${p.name}`)
      : '') },
  ], named, { caption: 'Named ports' });
}

// The log tail: reads on from the last offset of the chosen rank and stream.
function logView(id, ctx) {
  const rank = h('select', { id: 'log-rank' }, h('option', { value: '0' }, 'rank 0'));
  const stream = h('select', { id: 'log-stream' }, ['stdout', 'stderr'].map((s) => h('option', { value: s }, s)));
  const pre = h('pre', { class: 'log', id: 'log', 'aria-live': 'off', tabindex: '0' });
  let offset = 0, run = 0;
  async function poll() {
    const r = await api(`/v1/jobs/${encodeURIComponent(id)}/logs?stream=${stream.value}&rank=${rank.value}&offset=${offset}`, { text: true });
    const ranks = Number(r.headers.get('X-Log-Ranks') || 1);
    const served = Number(r.headers.get('X-Log-Run') || 0);
    if (served !== run) {
      // A requeue or retry started a new run: its log starts at 0.
      const first = run === 0;
      run = served;
      if (!first) {
        offset = 0;
        pre.append(`\n--- run ${served} ---\n`);
        return poll();
      }
    }
    while (rank.options.length < ranks) rank.append(h('option', { value: String(rank.options.length) }, `rank ${rank.options.length}`));
    offset = Number(r.headers.get('X-Log-Offset') || offset);
    if (r.text) {
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(r.text);
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    }
  }
  const restart = () => { offset = 0; pre.replaceChildren(); poll().catch(ctx.showError); };
  rank.addEventListener('change', restart);
  stream.addEventListener('change', restart);
  return { poll, el: h('section', {}, h('div', { class: 'toolbar' }, h('label', { for: 'log-rank' }, 'Rank', rank),
    h('label', { for: 'log-stream' }, 'Stream', stream)), pre) };
}

export async function render(main, [id, askedPort], ctx) {
  let job;
  try {
    job = await api(`/v1/jobs/${encodeURIComponent(id)}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      main.replaceChildren(h('h1', {}, `Job ${id}`), h('p', { class: 'status', id: 'not-found' }, `No job ${id} that you may see.`));
      return;
    }
    throw e;
  }
  const mine = session.admin || job.team === session.who.team;
  const head = h('h1', {});
  const actions = h('div', { class: 'toolbar', role: 'group', 'aria-label': 'Job actions' });
  const details = h('div');
  const ports = h('div');
  const events = h('div');
  // Sent here by the port proxy (no cookie for the port yet): one click opens it.
  const asked = askedPort ? h('p', { class: 'card', id: 'port-asked' }, `Open port ${askedPort} of job ${id}? `,
    h('button', { type: 'button', id: 'port-continue', onclick: () => openPort(job, askedPort, true, ctx) }, `Open ${askedPort}`)) : '';
  const log = logView(id, ctx);
  const act = (label, method, path, confirmText, cls) => h('button', {
    type: 'button', class: cls, id: `job-${label.toLowerCase()}`,
    onclick: async () => {
      if (confirmText && !window.confirm(confirmText)) return;
      try { await api(path, { method }); await refresh(); ctx.showError(null); } catch (e) { ctx.showError(e); }
    },
  }, label);
  async function refresh() {
    job = await api(`/v1/jobs/${encodeURIComponent(id)}`);
    const ev = await api(`/v1/jobs/${encodeURIComponent(id)}/events`);
    head.replaceChildren(`Job ${job.id}: ${job.name || '(no name)'} `, state(job.state));
    const base = `/v1/jobs/${encodeURIComponent(id)}`;
    actions.replaceChildren(...(!mine ? [] : [
      terminal.has(job.state) ? null : act('Cancel', 'DELETE', base, `Cancel job ${job.id}?`, 'danger'),
      job.state === 'pending' && !job.held ? act('Hold', 'POST', `${base}/hold`) : null,
      job.held ? act('Release', 'POST', `${base}/release`) : null,
    ].filter(Boolean)));
    details.replaceChildren(h('div', { class: 'grid2' },
      h('section', { class: 'card' }, h('h2', {}, 'Spec'), specList(job)),
      h('section', {}, h('h2', {}, 'Placement'), placementTable(job), h('h2', {}, 'GPU use'), gpuUse(job))));
    ports.replaceChildren(portsView(job, ctx));
    events.replaceChildren(timeline(ev.events));
    await log.poll();
  }
  await refresh();
  main.replaceChildren(head, asked, actions, details, h('h2', {}, 'Ports'), ports, h('h2', {}, 'Log'), log.el,
    h('h2', {}, 'Events'), events);
  ctx.every(3000, refresh);
}
