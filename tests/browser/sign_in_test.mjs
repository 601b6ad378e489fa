// Single sign-on end to end, against real parts: npm's oidc-provider as the organisation's
// identity provider, a real gantry server with identity.yaml, Debian's Chromium for the
// dashboard and the provider's pages, and the gantry CLI's device flow. Alice (ml-vision)
// and Bob (ml-nlp) sign in; Carol's group maps to no team; Bob is removed from his group.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, freePort, launchBrowser, screenshotDir, sleep, startServer, token, until } from './harness.mjs';
import { startProvider } from './oidc_provider.mjs';

const binary = process.env.GANTRY_BINARY;
const port = await freePort();
const gantryUrl = `http://127.0.0.1:${port}`;
const secret = token();
const idp = await startProvider({
  people: [{ name: 'alice', groups: ['ml-vision'] }, { name: 'bob', groups: ['ml-nlp'] },
    { name: 'carol', groups: ['contractors'] }, { name: 'dana', groups: ['ml-vision', 'ml-nlp'] }],
  clientSecret: secret,
  redirectUris: [`${gantryUrl}/auth/callback`],
});
const server = await startServer({
  users: [{ name: 'ci-vision', team: 'vision', role: 'user', token: token() },
    { name: 'ci-nlp', team: 'nlp', role: 'user', token: token() }],
  listen: `127.0.0.1:${port}`,
  extraArgs: ['--public-url', gantryUrl],
  files: {
    'identity.yaml': `oidc:\n  issuer: ${idp.issuer}\n  client_id: gantry\n  client_secret_file: oidc-secret\n` +
      'groups:\n  ml-vision: {team: vision}\n  ml-nlp: {team: nlp}\n',
    'oidc-secret': secret,
  },
});
const browser = await launchBrowser();
const shots = screenshotDir();

// Runs the gantry CLI with its own HOME (its own sessions file); resolves {code, out, err}.
function cli(home, args, onOut) {
  return new Promise((resolve) => {
    const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), GANTRY_SERVER: gantryUrl };
    delete env.GANTRY_TOKEN;
    const p = spawn(binary, args, { env });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; if (onOut) onOut(out); });
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code) => resolve({ code, out, err }));
  });
}

// The provider's development sign-in pages: login (any password), then consent.
async function signInAtProvider(page, name) {
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', name);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  await page.waitForSelector('button[autofocus]');
  await page.click('button[autofocus]');  // consent: Continue
}

async function dashboardSignIn(context, name) {
  const page = await context.newPage();
  await page.goto(gantryUrl + '/#/jobs');
  await page.click('#sso');
  await signInAtProvider(page, name);
  await page.waitForSelector('#nav:not([hidden])');
  return page;
}

try {
  // One job per team, as their CI users.
  for (const [team, name] of [['vision', 'vision-train'], ['nlp', 'nlp-train']]) {
    const r = await call(server, server.admin, 'POST', '/v1/jobs',
      { name, team, user: `ci-${team}`, gpus: 1, command: 'sleep 300' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const config = await (await fetch(gantryUrl + '/v1/auth/config')).json();
  assert.equal(config.oidc, true);
  assert.equal(config.issuer, idp.issuer);

  // Alice signs in to the dashboard and sees her team's jobs only, then signs out.
  const alice = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  let page = await dashboardSignIn(alice, 'alice');
  await until('alice named on the page', async () => (await page.textContent('#who-name')).includes('alice'));
  assert.match(await page.textContent('#who-name'), /team vision/);
  await until('the jobs page', async () => (await page.textContent('#main')).includes('vision-train'));
  assert.ok(!(await page.textContent('#main')).includes('nlp-train'), 'alice sees only team vision');
  assert.ok(!(await page.evaluate(() => document.cookie)).includes('gantry_refresh'), 'the refresh cookie is HttpOnly');
  await page.screenshot({ path: join(shots, 'sso-signed-in.png') });
  // A second tab of the same browser signs in from the session's cookie, without the provider.
  const tab = await alice.newPage();
  await tab.goto(gantryUrl + '/');
  await tab.waitForSelector('#nav:not([hidden])');
  await tab.close();
  await page.click('#sign-out');
  await page.waitForSelector('form.signin');
  await page.reload();
  await page.waitForSelector('#sso');
  assert.ok(await page.$('#nav[hidden]'), 'signed out stays signed out');
  const sessions = await call(server, server.admin, 'GET', '/v1/tokens');
  const mine = sessions.body.sessions.filter((s) => s.user === 'alice');
  assert.equal(mine.length, 1);
  assert.equal(mine[0].state, 'revoked');
  await alice.close();

  // Carol's only group maps to no team: refused, with the reason, and audited.
  const carolContext = await browser.newContext();
  page = await carolContext.newPage();
  await page.goto(gantryUrl + '/');
  await page.click('#sso');
  await signInAtProvider(page, 'carol');
  await page.waitForSelector('#reason');
  assert.match(await page.textContent('#reason'), /none of carol's groups \(contractors\) is mapped to a team/);
  await carolContext.close();

  // Dana is in both teams: the page shows her default team's jobs, and the other's when she
  // picks it.
  const danaContext = await browser.newContext();
  page = await dashboardSignIn(danaContext, 'dana');
  await until('dana on nlp', async () => (await page.textContent('#main')).includes('nlp-train'));
  await page.selectOption('#team-pick', 'vision');
  await until('dana on vision', async () => (await page.textContent('#who-name')).includes('team vision'));
  await until('vision jobs', async () => (await page.textContent('#main')).includes('vision-train'));
  assert.ok(!(await page.textContent('#main')).includes('nlp-train'), 'the picked team only');
  await danaContext.close();

  // Bob signs in; removed from ml-nlp at the provider, he is refused at his next refresh.
  const bobContext = await browser.newContext();
  page = await dashboardSignIn(bobContext, 'bob');
  await until('bob on the jobs page', async () => (await page.textContent('#main')).includes('nlp-train'));
  const bobToken = await page.evaluate(() => sessionStorage.getItem('gantry.token'));
  assert.equal((await call(server, bobToken, 'GET', '/v1/whoami')).body.team, 'nlp');
  idp.setGroups('bob', []);
  const again = await bobContext.newPage();  // a new tab asks the server to refresh
  await again.goto(gantryUrl + '/');
  await again.waitForSelector('form.signin');
  await until('the reason shown', async () => (await again.textContent('#status')).includes("none of bob's groups"));
  assert.equal((await call(server, bobToken, 'GET', '/v1/whoami')).status, 401, 'his session ended with the refusal');
  await bobContext.close();

  const audit = await call(server, server.admin, 'GET', '/v1/audit?limit=100');
  const lines = audit.body.audit.map((a) => `${a.user} ${a.action} ${a.outcome} ${a.detail}`);
  assert.ok(lines.some((l) => /^alice sign-in oidc ok .*groups \[ml-vision\]; teams vision/.test(l)), lines.join('\n'));
  assert.ok(lines.some((l) => /^carol sign-in oidc forbidden .*contractors/.test(l)), lines.join('\n'));
  assert.ok(lines.some((l) => /^bob refresh oidc forbidden/.test(l)), lines.join('\n'));
  assert.ok(lines.some((l) => /^alice sign-out ok/.test(l)), lines.join('\n'));

  // Anyone may call /auth/callback: an error for no sign-in under way is not audited, and
  // nothing a caller writes makes a line of its own.
  const forged = await fetch(`${gantryUrl}/auth/callback?state=made-up&error=access_denied&error_description=` +
    encodeURIComponent('x\n2026-12-06T02:40:00Z  dave  user  sign-in oidc  dave  ok'));
  assert.equal(forged.status, 400);
  assert.doesNotMatch(await forged.text(), /dave|access_denied/, "a caller's words are not shown as the provider's");
  const rows = (await call(server, server.admin, 'GET', '/v1/audit?limit=500')).body.audit;
  assert.ok(!rows.some((a) => /dave/.test(`${a.user} ${a.detail}`) || /[\r\n]/.test(a.detail)), 'no forged audit line');

  // The CLI: gantry login (the device flow, finished in the browser), then submit with it.
  const home = mkdtempSync(join(tmpdir(), 'gantry-sso-home-'));
  let verify = null;
  const login = cli(home, ['login'], (out) => {
    const m = out.match(/\(or open (\S+)\)/);
    if (m) verify = m[1];
  });
  await until('the device code printed', async () => verify !== null);
  const deviceContext = await browser.newContext();
  page = await deviceContext.newPage();
  await page.goto(verify);
  await page.click('button[autofocus]');  // confirm the code shown
  await signInAtProvider(page, 'alice');
  await page.waitForSelector('text=Sign-in Success');
  await deviceContext.close();
  const done = await login;
  assert.equal(done.code, 0, done.err);
  assert.match(done.out, /Signed in to .* as alice \(teams: vision\), acting for vision/);
  const whoami = await cli(home, ['whoami']);
  assert.equal(whoami.code, 0, whoami.err);
  assert.match(whoami.out, /^alice \(team vision, role user\)/);
  const submit = await cli(home, ['submit', '--name', 'sso-job', '--gpus', '1', '-o', 'json', '--', 'sleep', '1']);
  assert.equal(submit.code, 0, submit.err);
  const id = JSON.parse(submit.out).id;
  const job = await call(server, server.admin, 'GET', `/v1/jobs/${id}`);
  assert.equal(job.body.user, 'alice');
  assert.equal(job.body.team, 'vision');
  const list = await cli(home, ['tokens', 'list']);
  assert.match(list.out, /alice +oidc +vision +active/, list.err);
  const logout = await cli(home, ['logout']);
  assert.match(logout.out, /Signed out of/);
  const after = await cli(home, ['jobs']);
  assert.notEqual(after.code, 0, 'no session after logout');
  console.log('sign-in: dashboard, refusals, removal at refresh, audit and the CLI device flow all pass');
} finally {
  await browser.close();
  await server.stop();
  await idp.stop();
}
await sleep(0);
