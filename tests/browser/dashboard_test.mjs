// The dashboard in a real browser against a real server with fake GPUs: sign in, see a job
// wait in the queue with its reason, watch it start, read its log, cancel it as its owner,
// be refused another team's job (in the page and at the API), see a drained node and a
// fenced GPU change on the Nodes page, download the bill; a screenshot of each page.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, launchBrowser, screenshotDir, signedIn, startServer, token, until } from './harness.mjs';

const ana = token(), bo = token();
const server = await startServer({
  users: [{ name: 'ana', team: 'vision', role: 'user', token: ana }, { name: 'bo', team: 'nlp', role: 'user', token: bo }],
  quotas: 'teams:\n  vision: {guaranteed: {any: 2}, max_gpus: 6}\n  nlp: {guaranteed: {any: 2}}\n'
    + '  finance: {guaranteed: {any: 0}, budget: {monthly_cost: 100, on_exceed: alert}}\n',
});
const shots = screenshotDir();
const browser = await launchBrowser();
const started = Date.now();
try {
  // Every GPU held for a while, so ana's job waits with a reason and then starts.
  for (const n of [0, 1]) {
    const held = await call(server, server.admin, 'POST', '/v1/jobs', { name: `holder-${n}`, gpus: 4, hold_gpus: '12s' });
    assert.equal(held.status, 201, JSON.stringify(held.body));
  }
  const page = await signedIn(browser, server, ana);
  assert.match(await page.textContent('#who-name'), /ana · user · team vision/);
  await page.waitForSelector('[data-gpu-type="A100-80GB"]');

  const sub = await call(server, ana, 'POST', '/v1/jobs', {
    name: 'resnet-<b>bold</b>', gpus: 4, command: 'for i in 1 2 3 4 5; do echo "epoch $i loss 0.$i"; sleep 0.3; done; sleep 300',
  });
  assert.equal(sub.status, 201, JSON.stringify(sub.body));
  const id = sub.body.id;
  const other = await call(server, bo, 'POST', '/v1/jobs', { name: 'nlp-secret-run', gpus: 1, command: 'sleep 300' });
  assert.equal(other.status, 201);
  // At the API: while both wait, ana's queue has her job only; an admin's has both.
  const asAna = (await call(server, ana, 'GET', '/v1/queue')).body;
  assert.deepEqual(asAna.queue.map((j) => j.id), [id]);
  assert.equal(asAna.other_teams_waiting, 1);
  assert.doesNotMatch(JSON.stringify(asAna), /nlp-secret-run|"bo"/);
  const asAdmin = (await call(server, server.admin, 'GET', '/v1/queue')).body;
  assert.deepEqual(asAdmin.queue.map((j) => j.id).sort(), [id, other.body.id].sort());

  // An array of three tasks submitted held: one row, by its array id, among those kept out.
  const sweep = await call(server, ana, 'POST', '/v1/jobs', { name: 'sweep', array: '0-2', gpus: 1, command: 'true', hold: true });
  assert.equal(sweep.status, 201, JSON.stringify(sweep.body));

  // The queue shows ana's job with why it waits; bo's job is not on her page.
  await page.click('a[href="#/queue"]');
  const reason = page.locator(`tr:has(a[href="#/jobs/${id}"]) [data-code]`);
  await reason.waitFor();
  assert.equal(await reason.getAttribute('data-code'), 'no_capacity');
  await until('the held array as one row', async () => (await page.locator(`a:text-is("${sweep.body.id}_[0-2]")`).count()) === 1);
  assert.match(await reason.textContent(), /needs 4 GPUs/);
  assert.match(await page.textContent('main'), /resnet-<b>bold<\/b>/, 'a name is shown as text, not markup');
  assert.equal(await page.locator('main b').count(), 0);
  assert.doesNotMatch(await page.textContent('main'), /nlp-secret-run|bo\b/);
  assert.equal(await page.locator(`a[href="#/jobs/${other.body.id}"]`).count(), 0);
  await page.screenshot({ path: join(shots, 'queue.png'), fullPage: true });

  // Its page: it starts once the holds end, and its log streams in.
  await page.click(`a[href="#/jobs/${id}"]`);
  await until('the job to run', async () => (await page.textContent('h1')).includes('running'), 40000);
  await until('the log', async () => (await page.textContent('#log')).includes('epoch 5 loss 0.5'), 20000);
  await until('the started event', async () => (await page.locator('.timeline li[data-kind="started"]').count()) > 0);
  assert.match(await page.textContent('main'), /Placement/);
  await page.screenshot({ path: join(shots, 'job.png'), fullPage: true });

  // Cancel as its owner.
  page.once('dialog', (d) => d.accept());
  await page.click('#job-cancel');
  await until('the job to be cancelled', async () => (await page.textContent('h1')).includes('cancelled'), 60000);

  // Another team's job: refused in the page and at the API; its log too.
  await page.goto(`${server.url}/#/jobs/${other.body.id}`);
  await page.waitForSelector('#not-found');
  assert.doesNotMatch(await page.textContent('main'), /nlp-secret-run/);
  assert.equal((await call(server, ana, 'GET', `/v1/jobs/${other.body.id}`)).status, 404);
  assert.equal((await call(server, ana, 'GET', `/v1/jobs/${other.body.id}/logs`)).status, 404);
  const nodesAsAna = JSON.stringify((await call(server, ana, 'GET', '/v1/nodes?telemetry=true')).body);
  assert.doesNotMatch(nodesAsAna, new RegExp(`"job":"${other.body.id}"|"jobs":\\["${other.body.id}"|nlp`));
  const jobsOfAna = await call(server, ana, 'GET', '/v1/jobs?q=nlp');
  assert.equal(jobsOfAna.body.total, 0);
  const teams = await call(server, ana, 'GET', '/v1/teams');
  assert.deepEqual(teams.body.teams.map((t) => t.team), ['vision']);
  const usage = await call(server, ana, 'GET', '/v1/usage?team=nlp');
  assert.equal(usage.status, 403);

  // Jobs page: search finds her job, not bo's.
  await page.click('a[href="#/jobs"]');
  await page.fill('#j-search', 'resnet');
  await until('the search', async () => (await page.locator(`a[href="#/jobs/${id}"]`).count()) === 1);
  await page.screenshot({ path: join(shots, 'jobs.png'), fullPage: true });

  // Nodes as ana: bo's running job is a part without a name.
  await page.click('a[href="#/nodes"]');
  await page.waitForSelector('[data-node]');
  assert.equal(await page.locator('button.drain').count(), 0, 'users get no drain buttons');
  await until("bo's job as an unnamed part", async () => (await page.locator('.parts > span.other').count()) === 1);
  assert.equal(await page.locator('.busy-other').count(), 1, "the GPU bo's job holds is busy, not idle");
  assert.doesNotMatch(await page.textContent('main'), new RegExp(`\\b${other.body.id}\\b.*nlp|nlp-secret`));

  // An admin drains a node and fences a GPU from the Nodes page; ana's page sees both.
  const adminPage = await signedIn(browser, server, server.admin);
  await adminPage.click('a[href="#/nodes"]');
  const nodeId = await adminPage.locator('section[data-node]').last().getAttribute('data-node');
  await adminPage.click(`section[data-node="${nodeId}"] button.drain`);
  await until('the node to drain', async () => /drain/.test(await adminPage.locator(`section[data-node="${nodeId}"]`).getAttribute('data-state')));
  const firstNode = await adminPage.locator('section[data-node]').first().getAttribute('data-node');
  await adminPage.click(`[data-gpu="${firstNode}:3"] button.fence`);
  await until('the GPU to be fenced', async () => (await adminPage.locator(`[data-gpu="${firstNode}:3"]`).getAttribute('data-health')) === 'fenced');
  await until('ana to see the drain', async () => /drain/.test(await page.locator(`section[data-node="${nodeId}"]`).getAttribute('data-state')), 15000);
  await until('ana to see the fence', async () => (await page.locator(`[data-gpu="${firstNode}:3"]`).getAttribute('data-health')) === 'fenced', 15000);
  await adminPage.screenshot({ path: join(shots, 'nodes.png'), fullPage: true });
  await adminPage.click('a[href="#/"]');
  await adminPage.waitForSelector('.chart');
  const cards = await adminPage.textContent('[data-gpu-type="A100-80GB"]');
  assert.match(cards, /Out of service\s*5/, cards);
  await adminPage.click('button[aria-pressed]:has-text("1h")');
  await adminPage.waitForSelector('figure.chart .uplot');
  await adminPage.screenshot({ path: join(shots, 'overview.png'), fullPage: true });

  // Usage and bills: the bill downloads as CSV and HTML with the team's figures.
  await page.click('a[href="#/usage"]');
  await page.waitForSelector('#bill-csv');
  assert.match(await page.textContent('main'), /Total: 0\.0\d*[1-9]\d* GPU-hours/, 'a small total is not rounded to 0');
  const [csv] = await Promise.all([page.waitForEvent('download'), page.click('#bill-csv')]);
  const csvText = readFileSync(await csv.path(), 'utf8');
  assert.match(csvText, /^section,/);
  assert.match(csvText, /vision/);
  assert.doesNotMatch(csvText, /\bnlp\b/, "a user's bill has no other team's costs");
  const [html] = await Promise.all([page.waitForEvent('download'), page.click('#bill-html')]);
  const htmlText = readFileSync(await html.path(), 'utf8');
  assert.match(htmlText, /<html/);
  await csv.saveAs(join(shots, 'bill.csv'));
  await page.screenshot({ path: join(shots, 'usage.png'), fullPage: true });
  await adminPage.click('a[href="#/usage"]');
  await adminPage.waitForSelector('#bill-csv');
  await until('the admin to see budgets', async () => (await adminPage.textContent('main')).includes('finance'));

  // A token that is refused brings back the sign-in form.
  await page.evaluate(() => sessionStorage.setItem('gantry.token', 'not-a-token'));
  await page.reload();
  await page.waitForSelector('form.signin');
  console.log(`dashboard browser test passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${shots}`);
} catch (e) {
  console.error(readFileSync(server.log, 'utf8').slice(-4000));
  throw e;
} finally {
  await browser.close();
  await server.stop();
}
