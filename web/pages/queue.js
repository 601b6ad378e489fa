// Queue: waiting jobs in the engine's order with why each waits and when it should start,
// filtered by team (users see their own), code and priority, a page at a time; and the jobs
// kept out of the line (held, dependencies, array limits).
import { api, h, num, duration, when, jobLink, table, pager, session, groupTasks, rowId } from '../lib.js';

const limit = 100;

export async function render(main, _params, ctx) {
  let offset = 0;
  const team = h('input', { id: 'q-team', placeholder: 'all teams', value: session.admin ? '' : session.who.team, disabled: !session.admin });
  const code = h('select', { id: 'q-code' }, ['', 'no_capacity', 'behind_reservation', 'strict_order', 'never_fits',
    'no_schedulable_node', 'not_examined', 'quota', 'preempting'].map((c) => h('option', { value: c }, c || 'any reason')));
  const priority = h('input', { id: 'q-priority', placeholder: 'any class' });
  const body = h('div');
  async function refresh() {
    const teamFilter = session.admin ? team.value.trim() : session.who.team;
    const q = await api(`/v1/queue?limit=${limit}&offset=${offset}${teamFilter ? `&team=${encodeURIComponent(teamFilter)}` : ''}`);
    const rows = q.queue.filter((j) => (!code.value || j.code === code.value)
      && (!priority.value || j.priority === priority.value.trim()));
    body.replaceChildren(
      h('p', { class: 'muted' }, `${q.total} waiting${teamFilter ? ` in team ${teamFilter}` : ''}; ${q.starting_next_cycle.length} starting at the next cycle.`),
      table([
        { title: '#', num: true, cell: (j) => String(j.position) },
        { title: 'Job', cell: (j) => jobLink(j.id, rowId(j)) },
        { title: 'Name', cell: (j) => j.name },
        { title: 'Team', cell: (j) => j.team },
        { title: 'User', cell: (j) => j.user },
        { title: 'Class', cell: (j) => j.priority },
        { title: 'GPUs', num: true, cell: (j) => num(j.gpus) },
        { title: 'Waiting', num: true, cell: (j) => duration(j.waiting_s) },
        { title: 'Why it waits', cell: (j) => h('span', { title: j.code, 'data-code': j.code }, j.reason) },
        { title: 'Estimated start', cell: (j) => when(j.estimated_start) },
      ], groupTasks(rows, (j) => `${j.code}\n${j.reason}`), { empty: 'No job is waiting.', caption: 'Waiting jobs' }),
      pager(q.total, offset, limit, (o) => { offset = o; refresh().catch(ctx.showError); }),
      h('h2', {}, 'Kept out of the line'),
      table([
        { title: 'Job', cell: (j) => jobLink(j.id, rowId(j)) },
        { title: 'Name', cell: (j) => j.name },
        { title: 'Team', cell: (j) => j.team },
        { title: 'User', cell: (j) => j.user },
        { title: 'Why', cell: (j) => j.reason },
      ], groupTasks(q.blocked, (j) => `${j.code}\n${j.reason}`), { empty: 'None: no job is held or waiting on a dependency.', caption: 'Blocked jobs' }));
  }
  for (const el of [team, code, priority]) el.addEventListener('change', () => { offset = 0; refresh().catch(ctx.showError); });
  await refresh();
  main.replaceChildren(h('h1', {}, 'Queue'),
    h('div', { class: 'toolbar' },
      h('label', { for: 'q-team' }, 'Team', team), h('label', { for: 'q-code' }, 'Reason', code),
      h('label', { for: 'q-priority' }, 'Priority class', priority)),
    body);
  ctx.every(5000, refresh);
}
