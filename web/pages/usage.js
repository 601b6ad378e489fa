// Usage and bills: GPU-hours and cost by team, project, user, GPU type or job over a chosen
// range (chart and table), the monthly bill as CSV or HTML, budgets with their levels, and
// the latest alerts. Users see their own team's figures only (the API's rule).
import { api, h, num, money, hours, when, table, barChart, download } from '../lib.js';

const pad = (n) => String(n).padStart(2, '0');
const day = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;

function lineLabel(l, by) {
  if (by === 'project') return `${l.team}/${l.project || '(none)'}`;
  if (by === 'user') return `${l.team}/${l.user}`;
  if (by === 'job') return `${l.job_id}${l.name ? ` ${l.name}` : ''}`;
  return l[by] ?? '';
}

export async function render(main, _params, ctx) {
  const now = new Date();
  const from = h('input', { id: 'u-from', type: 'date', value: day(new Date(now.getFullYear(), now.getMonth(), 1)) });
  const to = h('input', { id: 'u-to', type: 'date', value: day(new Date(now.getTime() + 86400000)) });
  const by = h('select', { id: 'u-by' }, ['team', 'project', 'user', 'gpu_type', 'job'].map((b) => h('option', { value: b }, b.replace('_', ' '))));
  const month = h('input', { id: 'u-month', type: 'month', value: `${now.getFullYear()}-${pad(now.getMonth() + 1)}` });
  const usageBox = h('div');
  const budgetsBox = h('div');
  const alertsBox = h('div');

  async function loadUsage() {
    const u = await api(`/v1/usage?from=${from.value}&to=${to.value}&by=${by.value}`);
    const lines = u.lines.slice(0, 30);
    usageBox.replaceChildren(
      h('p', {}, `Total: ${hours(u.total.gpu_hours)} GPU-hours, ${money(u.total.cost, u.currency)}`
        + (u.total.avg_utilization_pct !== null && u.total.avg_utilization_pct !== undefined ? `, ${num(u.total.avg_utilization_pct, 1)}% average utilization` : '')),
      lines.length ? h('div', { class: 'grid2' },
        barChart(`Cost by ${by.value.replace('_', ' ')} (${u.currency})`, lines.map((l) => lineLabel(l, by.value)), lines.map((l) => l.cost), { yLabel: u.currency }),
        barChart(`GPU-hours by ${by.value.replace('_', ' ')}`, lines.map((l) => lineLabel(l, by.value)), lines.map((l) => l.gpu_hours), { yLabel: 'GPU-hours' })) : null,
      table([
        { title: by.value.replace('_', ' '), cell: (l) => lineLabel(l, by.value) },
        { title: 'GPU-hours', num: true, cell: (l) => hours(l.gpu_hours) },
        { title: 'Cost', num: true, cell: (l) => money(l.cost, u.currency) },
        { title: 'Avg. utilization', num: true, cell: (l) => (l.avg_utilization_pct === null ? '–' : `${num(l.avg_utilization_pct, 1)}%`) },
        { title: 'Idle cost', num: true, cell: (l) => money(l.idle_cost, u.currency) },
      ], u.lines, { empty: 'No GPU time in this range.', caption: 'Usage' }));
  }
  async function loadBudgets() {
    const [b, a] = await Promise.all([api('/v1/budgets'), api('/v1/alerts')]);
    const limitText = (x) => [x.cost !== undefined ? money(x.cost, b.currency) : null,
      x.gpu_hours !== undefined ? `${num(x.gpu_hours)} GPU-hours` : null].filter(Boolean).join(' and ') || '–';
    budgetsBox.replaceChildren(table([
      { title: 'Scope', cell: (x) => x.scope },
      { title: 'Limit', cell: (x) => limitText(x.limit) },
      { title: 'Used', cell: (x) => `${money(x.used.cost, b.currency)}, ${hours(x.used.gpu_hours)} GPU-hours` },
      { title: 'Used %', num: true, cell: (x) => h('span', { class: `level-${x.level}` }, `${num(x.used_pct, 1)}%`) },
      { title: 'Level', cell: (x) => (x.level >= 100 ? 'exceeded' : x.level >= 80 ? 'warning (80%)' : 'ok') },
      { title: 'On exceed', cell: (x) => `${x.on_exceed}${x.held ? ' (new jobs held)' : ''}` },
    ], b.budgets, { empty: 'No budgets are set in team_quotas.yaml.', caption: `Budgets ${b.month}` }));
    alertsBox.replaceChildren(table([
      { title: 'Time', cell: (x) => when(x.time) }, { title: 'Kind', cell: (x) => x.kind },
      { title: 'Team', cell: (x) => x.team || '–' }, { title: 'Message', cell: (x) => x.message },
    ], a.alerts.slice(0, 50), { empty: 'No alerts.', caption: 'Alerts' }));
  }
  const bill = (format) => download(`/v1/reports/monthly?month=${month.value}&format=${format}`, `gantry-bill-${month.value}.${format}`)
    .then(() => ctx.showError(null), ctx.showError);
  for (const el of [from, to, by]) el.addEventListener('change', () => loadUsage().catch(ctx.showError));
  await Promise.all([loadUsage(), loadBudgets()]);
  main.replaceChildren(h('h1', {}, 'Usage and bills'),
    h('div', { class: 'toolbar' }, h('label', { for: 'u-from' }, 'From', from), h('label', { for: 'u-to' }, 'To (exclusive)', to),
      h('label', { for: 'u-by' }, 'By', by)),
    usageBox,
    h('h2', {}, 'Monthly bill'),
    h('div', { class: 'toolbar' }, h('label', { for: 'u-month' }, 'Month', month),
      h('button', { type: 'button', id: 'bill-csv', onclick: () => bill('csv') }, 'Download CSV'),
      h('button', { type: 'button', id: 'bill-html', onclick: () => bill('html') }, 'Download HTML')),
    h('h2', {}, 'Budgets'), budgetsBox,
    h('h2', {}, 'Alerts'), alertsBox);
  ctx.every(15000, () => Promise.all([loadUsage(), loadBudgets()]));
}
