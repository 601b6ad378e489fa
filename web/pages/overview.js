// Overview: GPUs by type, utilization and queue over 24 h or 7 days (the server's stored
// history), each team's jobs against its guarantee and limit, and this month's cost by team.
import { api, h, num, money, hours, quotaBar, lineChart, table } from '../lib.js';

let range = '';  // chosen at the first visit: the shortest range that holds the history

function gpuCards(cluster) {
  const types = Object.entries(cluster.by_type || {});
  if (!types.length) return h('p', { class: 'muted' }, 'No GPUs registered yet.');
  return h('div', { class: 'cards' }, types.map(([type, c]) => h('section', { class: 'card', 'data-gpu-type': type },
    h('h3', {}, type),
    h('div', { class: 'big' }, `${num(c.allocated)} / ${c.total}`), h('div', { class: 'muted' }, 'GPUs allocated, of those on nodes in service'),
    h('dl', { class: 'spec' },
      h('dt', {}, 'Idle'), h('dd', {}, String(c.available)),
      h('dt', {}, 'Out of service'), h('dd', { title: 'on drained or down nodes, unhealthy or fenced' }, String(c.unavailable ?? 0))))));
}

function charts(history) {
  const ts = history.points.map((p) => Date.parse(p.t) / 1000);
  const util = history.points.map((p) => p.utilization * 100);
  const measured = history.points.map((p) => p.gpu_util_pct);
  const queued = history.points.map((p) => p.queued);
  const running = history.points.map((p) => p.running);
  const xRange = [Date.parse(history.from) / 1000, Date.parse(history.to) / 1000];
  if (!ts.length) return h('p', { class: 'muted' }, 'No history yet: the server samples the cluster once a minute.');
  return h('div', { class: 'grid2' },
    lineChart(`Utilization, last ${range}`, ts, [
      { label: 'Allocated %', values: util, stroke: '#1f5fbf' },
      { label: 'Measured GPU %', values: measured, stroke: '#1e7a3c' }], { yLabel: '%', xRange }),
    lineChart(`Queue, last ${range}`, ts, [
      { label: 'Waiting jobs', values: queued, stroke: '#a86400' },
      { label: 'Running jobs', values: running, stroke: '#1f5fbf' }], { yLabel: 'jobs', xRange, counts: true }));
}

function teamsTable(teams) {
  return table([
    { title: 'Team', cell: (t) => t.team + (t.listed ? '' : ' (default quota)') },
    { title: 'Running', num: true, cell: (t) => String(t.running_jobs) },
    { title: 'Waiting', num: true, cell: (t) => `${t.pending_jobs}${t.blocked_jobs ? ` (+${t.blocked_jobs} held or blocked)` : ''}` },
    { title: 'GPUs held', num: true, cell: (t) => num(t.allocated_gpus) },
    { title: 'Guarantee', num: true, cell: (t) => num(t.guaranteed_gpus) },
    { title: 'Limit', num: true, cell: (t) => (t.max_gpus === null ? 'none' : num(t.max_gpus)) },
    { title: 'Held vs guarantee and limit', cell: (t) => quotaBar(t.allocated_gpus, t.guaranteed_gpus, t.max_gpus) },
  ], teams, { empty: 'No team has jobs and none is in team_quotas.yaml.', caption: 'Teams' });
}

function costTable(usage) {
  return table([
    { title: 'Team', cell: (l) => l.team },
    { title: 'GPU-hours', num: true, cell: (l) => hours(l.gpu_hours) },
    { title: 'Cost', num: true, cell: (l) => money(l.cost, usage.currency) },
    { title: 'Idle cost', num: true, cell: (l) => money(l.idle_cost, usage.currency) },
  ], usage.lines, { empty: 'Nothing billed this month yet.', caption: 'Cost this month by team' });
}

export async function render(main, _params, ctx) {
  const body = h('div');
  const rangeButtons = ['1h', '24h', '7d'].map((r) => h('button', {
    type: 'button', 'aria-pressed': String(r === range),
    onclick: () => { range = r; rangeButtons.forEach((b) => b.setAttribute('aria-pressed', String(b.textContent === r))); refresh(); },
  }, r));
  async function refresh() {
    if (!range) {
      // A new server's history is an hour at most: opened on 24 h it would be a sliver.
      const day = await api('/v1/history?range=24h');
      const first = day.points.length ? Date.parse(day.points[0].t) : Date.now();
      range = Date.now() - first < 2 * 3600 * 1000 ? '1h' : '24h';
      rangeButtons.forEach((b) => b.setAttribute('aria-pressed', String(b.textContent === range)));
    }
    const [cluster, teams, history, usage] = await Promise.all([
      api('/v1/cluster'), api('/v1/teams'), api(`/v1/history?range=${range}`), api('/v1/usage?by=team')]);
    body.replaceChildren(
      h('h2', {}, 'GPUs by type'), gpuCards(cluster),
      h('p', { class: 'muted' }, `${num(cluster.allocated_gpus)} of ${cluster.total_gpus} GPUs allocated (${num(cluster.utilization * 100, 1)}%), `
        + `${cluster.running} jobs running, ${cluster.queued} waiting, ${cluster.nodes} nodes.`),
      h('h2', {}, 'History'), h('div', { class: 'toolbar', role: 'group', 'aria-label': 'History range' }, rangeButtons),
      charts(history),
      h('h2', {}, 'Teams: jobs and GPUs against guarantees and limits'), teamsTable(teams.teams),
      h('h2', {}, 'Cost this month by team'), costTable(usage));
  }
  await refresh();
  main.replaceChildren(h('h1', {}, 'Overview'), body);
  ctx.every(10000, refresh);
}
