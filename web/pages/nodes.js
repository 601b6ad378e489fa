// Nodes: every node's GPUs as a grid with live utilization, memory, temperature and health,
// the jobs on each GPU drawn as parts of it (fractions, MPS and MIG slices; another team's
// job is a hatched part without a name, and the tile says the GPU is busy with another
// team's work), and drain/undrain for admins. A page at a time.
import { api, h, num, state, session, pager } from '../lib.js';

const limit = 48;

function gpuTile(node, g, refresh, showError) {
  const t = g.telemetry || {};
  const cls = ['gpu', g.healthy ? '' : 'unhealthy', g.fenced ? 'fenced' : ''].join(' ').trim();
  const health = !g.healthy ? 'unhealthy' : g.fenced ? 'fenced' : 'healthy';
  const parts = h('div', { class: 'parts', role: 'img', 'aria-label': `${g.shares.length} job(s) on GPU ${g.index}` },
    g.shares.map((p) => (p.job
      ? h('a', { href: `#/jobs/${encodeURIComponent(p.job)}`, title: `job ${p.job} (${p.user}, ${p.sharing}, ${num(p.share)} GPU)`, style: { width: `${p.share * 100}%` } })
      : h('span', { class: 'other', title: `another team's job (${num(p.share)} GPU)`, style: { width: `${p.share * 100}%` } }))));
  const mem = t.memory_total_mib > 0 ? `${num(t.memory_used_mib / 1024, 1)}/${num(t.memory_total_mib / 1024, 0)} GiB` : '–';
  const fence = session.admin ? h('button', {
    type: 'button', class: 'fence', title: g.fenced ? 'Return this GPU to service' : 'Fence this GPU (no new jobs)',
    onclick: async () => {
      try { await api(`/v1/nodes/${encodeURIComponent(node.id)}/${g.fenced ? 'undrain' : 'drain'}?gpu=${g.index}`, { method: 'POST' }); await refresh(); } catch (e) { showError(e); }
    },
  }, g.fenced ? 'Unfence' : 'Fence') : null;
  return h('div', { class: cls, 'data-gpu': `${node.id}:${g.index}`, 'data-health': health },
    h('strong', {}, `GPU ${g.index}`), ` ${health}`, parts,
    h('div', {}, `util ${t.utilization_pct >= 0 ? `${num(t.utilization_pct, 0)}%` : '–'}`),
    h('div', {}, `mem ${mem}`),
    h('div', {}, `temp ${t.temperature_c >= 0 ? `${num(t.temperature_c, 0)} °C` : '–'}`),
    g.jobs.length ? h('div', {}, 'jobs ', g.jobs.map((j, i) => [i ? ', ' : '', h('a', { href: `#/jobs/${encodeURIComponent(j)}` }, j)])) : null,
    g.shares.some((p) => !p.job) ? h('div', { class: 'busy-other' }, 'busy: another team') : null,
    fence);
}

function nodeCard(node, refresh, showError) {
  const drain = session.admin ? h('button', {
    type: 'button', class: 'drain', 'data-node': node.id,
    onclick: async () => {
      const undrain = node.state === 'drained' || node.state === 'draining';
      try { await api(`/v1/nodes/${encodeURIComponent(node.id)}/${undrain ? 'undrain' : 'drain'}`, { method: 'POST' }); await refresh(); } catch (e) { showError(e); }
    },
  }, node.state === 'up' ? 'Drain' : 'Undrain') : null;
  return h('section', { class: 'card', 'data-node': node.id, 'data-state': node.state },
    h('h3', {}, node.id, ' ', state(node.state)),
    h('div', { class: 'muted' }, `${node.gpu_type} · ${node.gpus.length} GPUs · ${node.cpus} CPUs · agent ${node.agent_connected ? 'connected' : 'not connected'}`),
    h('div', { class: 'gpus' }, node.gpus.map((g) => gpuTile(node, g, refresh, showError))),
    drain);
}

export async function render(main, _params, ctx) {
  let offset = 0;
  const body = h('div');
  async function refresh() {
    const r = await api(`/v1/nodes?telemetry=true&limit=${limit}&offset=${offset}`);
    body.replaceChildren(
      pager(r.total, offset, limit, (o) => { offset = o; refresh().catch(ctx.showError); }),
      h('div', { class: 'nodes' }, r.nodes.map((n) => nodeCard(n, refresh, ctx.showError))));
  }
  await refresh();
  main.replaceChildren(h('h1', {}, 'Nodes'), body);
  ctx.every(5000, refresh);
}
