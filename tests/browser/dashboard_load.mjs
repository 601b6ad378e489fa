// How fast the dashboard's pages load with 10,000 jobs and 1,000 nodes in the store: 1,000
// nodes register through the agent API, 10,000 GPU holds are submitted (2,000 run, the rest
// wait), and Chromium opens each page three times, from a fresh load of the URL to the
// page drawn (its data fetched). Prints a table (docs/BENCHMARKS.md); asserts what the
// pages show, never the times.
import assert from 'node:assert/strict';
import { call, launchBrowser, startServer, token } from './harness.mjs';

const nodes = Number(process.env.GANTRY_LOAD_NODES || 1000);
const jobs = Number(process.env.GANTRY_LOAD_JOBS || 10000);
const agents = Array.from({ length: nodes }, (_, i) => ({
  name: `agent-${i}`, team: 'ops', role: 'agent', node: `gpu-${String(i).padStart(4, '0')}`, token: token(),
}));
const ana = token();
const server = await startServer({
  users: [...agents, { name: 'ana', team: 'vision', role: 'user', token: ana }],
  fakeGpus: '1x8xA100-80GB', extraArgs: ['--node-timeout', '86400'],
});
const browser = await launchBrowser();
try {
  let t0 = Date.now();
  for (let i = 0; i < agents.length; i += 50) {
    await Promise.all(agents.slice(i, i + 50).map(async (a) => {
      const gpus = Array.from({ length: 8 }, (_, g) => ({
        index: g, uuid: `GPU-${a.node}-${g}`, name: 'NVIDIA A100-SXM4-80GB', memory_total_mib: 81920, mig_enabled: false,
      }));
      const r = await call(server, a.token, 'POST', '/v1/agent/register',
        { node_id: a.node, inventory: { provider: 'fake', driver_version: '580.00', gpus }, labels: {}, runs: [] });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }));
  }
  const registerS = (Date.now() - t0) / 1000;
  t0 = Date.now();
  const teams = ['vision', 'nlp', 'speech', 'recsys', 'research'];
  for (let i = 0; i < jobs; i += 500) {
    const batch = Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({
      name: `load-${i + k}`, gpus: 4, hold_gpus: '2h', user: `u${(i + k) % 40}`, team: teams[(i + k) % teams.length],
    }));
    const r = await call(server, server.admin, 'POST', '/v1/jobs/batch', { jobs: batch });
    assert.equal(r.status, 201, JSON.stringify(r.body).slice(0, 300));
  }
  const submitS = (Date.now() - t0) / 1000;
  const all = await call(server, server.admin, 'GET', '/v1/jobs?limit=1');
  assert.equal(all.body.total, jobs);

  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.addInitScript((t) => sessionStorage.setItem('gantry.token', t), server.admin);
  const page = await context.newPage();
  const pages = [['Overview', '#/'], ['Queue', '#/queue'], ['Jobs', '#/jobs'], ['Nodes', '#/nodes'], ['Usage and bills', '#/usage']];
  const rows = [];
  for (const [title, hash] of pages) {
    const times = [];
    for (let k = 0; k < 3; k++) {
      const start = Date.now();
      await page.goto(`${server.url}/${hash}`);
      await page.waitForFunction((t) => document.getElementById('main').dataset.page === t, title, { timeout: 60000 });
      times.push(Date.now() - start);
      await page.goto('about:blank');
    }
    times.sort((a, b) => a - b);
    rows.push([title, times[1], times[0], times[2]]);
  }
  // What the pages showed with the whole store behind them.
  await page.goto(`${server.url}/#/nodes`);
  await page.waitForSelector('section[data-node]');
  assert.match(await page.textContent('.pager'), new RegExp(`of ${nodes + 1}`));
  await page.goto(`${server.url}/#/jobs`);
  await page.waitForSelector('.pager');
  assert.match(await page.textContent('.pager'), new RegExp(`of ${jobs.toLocaleString('en-US').replace(',', ',?')}|of ${jobs}`));
  console.log(`${nodes} nodes registered in ${registerS.toFixed(1)} s; ${jobs} jobs submitted in ${submitS.toFixed(1)} s`);
  console.log('| page | median ms | min ms | max ms |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
} finally {
  await browser.close();
  await server.stop();
}
