// Jobs: search (id, name or user) and filter (state, team, user) over the caller's jobs,
// newest first, a page at a time.
import { api, h, num, duration, when, jobLink, state, table, pager, session, groupTasks, rowId } from '../lib.js';

const limit = 50;

export async function render(main, _params, ctx) {
  let offset = 0;
  const search = h('input', { id: 'j-search', type: 'search', placeholder: 'id, name or user' });
  const stateSel = h('select', { id: 'j-state' }, ['', 'active', 'pending', 'running', 'stopping', 'succeeded', 'failed',
    'cancelled'].map((s) => h('option', { value: s }, s || 'any state')));
  const team = h('input', { id: 'j-team', placeholder: 'all teams', hidden: !session.admin });
  const body = h('div');
  async function refresh() {
    const params = new URLSearchParams({ limit, offset });
    if (search.value.trim()) params.set('q', search.value.trim());
    if (stateSel.value) params.set('state', stateSel.value);
    if (session.admin && team.value.trim()) params.set('team', team.value.trim());
    const r = await api(`/v1/jobs?${params}`);
    const now = Date.now();
    body.replaceChildren(table([
      { title: 'Job', cell: (j) => jobLink(j.id, rowId(j)) },
      { title: 'Name', cell: (j) => j.name },
      { title: 'User', cell: (j) => j.user },
      { title: 'Team', cell: (j) => j.team },
      { title: 'State', cell: (j) => state(j.state) },
      { title: 'GPUs', num: true, cell: (j) => num(j.gpu_share ?? j.spec?.gpus) },
      { title: 'Submitted', cell: (j) => when(j.submitted_at) },
      { title: 'Started', cell: (j) => when(j.started_at) },
      { title: 'Elapsed', num: true, cell: (j) => (j.started_at ? duration(((j.ended_at ? Date.parse(j.ended_at) : now) - Date.parse(j.started_at)) / 1000) : '–') },
    ], groupTasks(r.jobs, (j) => (j.placement ? `${j.id}` : `${j.state}\n${j.reason || ''}`)), { empty: 'No job matches.', caption: 'Jobs' }),
    pager(r.total, offset, limit, (o) => { offset = o; refresh().catch(ctx.showError); }));
  }
  let typing;
  search.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(() => { offset = 0; refresh().catch(ctx.showError); }, 250); });
  for (const el of [stateSel, team]) el.addEventListener('change', () => { offset = 0; refresh().catch(ctx.showError); });
  await refresh();
  main.replaceChildren(h('h1', {}, 'Jobs'),
    h('div', { class: 'toolbar' }, h('label', { for: 'j-search' }, 'Search', search), h('label', { for: 'j-state' }, 'State', stateSel),
      session.admin ? h('label', { for: 'j-team' }, 'Team', team) : null),
    body);
  ctx.every(5000, refresh);
}
