// A job's web app opened from the dashboard in Chromium, through the server's port proxy:
// the job page's Open button gets a ticket and opens the app on the proxy's own origin,
// where the app's page talks to the job over a WebSocket and cannot read Gantry's cookie;
// the app's address opened in a browser without a cookie comes back through the dashboard;
// a teammate gets no Open button and is refused at the API.
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { call, launchBrowser, signedIn, startServer, token, until } from './harness.mjs';

const ana = token(), cy = token();
// Ports of its own (jobs outlive a stopped server; tests beside this one use the default range).
const first = 30000 + (process.pid % 50) * 20;
const server = await startServer({
  users: [{ name: 'ana', team: 'vision', role: 'user', token: ana }, { name: 'cy', team: 'vision', role: 'user', token: cy }],
  extraArgs: ['--ports', `${first}-${first + 19}`],
});
let id = '';
// The app where the job's account (nobody) reads it.
const app = `/tmp/gantry-port-app-browser-${process.pid}.py`;
copyFileSync(fileURLToPath(new URL('../server/port_app.py', import.meta.url)), app);
chmodSync(app, 0o644);
const browser = await launchBrowser();
try {
  const sub = await call(server, ana, 'POST', '/v1/jobs', { name: 'notebook', gpus: 1, ports: ['web'], command: `exec python3 ${app}` });
  assert.equal(sub.status, 201, JSON.stringify(sub.body));
  id = sub.body.id;
  let proxyUrl = '';
  await until('the job runs and its app answers', async () => {
    const j = (await call(server, ana, 'GET', `/v1/jobs/${id}`)).body;
    proxyUrl = ((j.ports || []).find((p) => p.name === 'web') || {}).proxy_url || '';
    if (!proxyUrl) return false;
    return (await fetch(`${proxyUrl}ready`, { headers: { Authorization: `Bearer ${ana}` } })).status === 200;
  });
  assert.notEqual(new URL(proxyUrl).origin, new URL(server.url).origin, 'the apps never share the dashboard\'s origin');

  // The Open button: a new tab on the proxy's origin, the app's page and its WebSocket.
  const page = await signedIn(browser, server, ana);
  await page.goto(`${server.url}/#/jobs/${id}`);
  const open = page.locator('#port-open-web');
  await open.waitFor();
  assert.match(await page.textContent('main'), new RegExp(proxyUrl.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  const [tab] = await Promise.all([page.context().waitForEvent('page'), open.click()]);
  await until('the app\'s WebSocket echo', async () => (await tab.textContent('#out')) === 'echo:hi');
  assert.equal(new URL(tab.url()).origin, new URL(proxyUrl).origin);
  assert.equal(new URL(tab.url()).pathname, `/jobs/${id}/ports/web/`);
  assert.equal(new URL(tab.url()).search, '', 'the ticket is gone from the address');
  const scriptCookies = await tab.textContent('#cookies');
  assert.doesNotMatch(scriptCookies, /gantry/, 'the app\'s scripts cannot read the proxy\'s cookie');
  assert.match(scriptCookies, /app=1/);
  // Reloading keeps working on the cookie alone.
  await tab.reload();
  await until('the app after a reload', async () => (await tab.textContent('#out')) === 'echo:hi');

  // The address opened in another browser: to the dashboard, one click, the app.
  const other = await signedIn(browser, server, ana);
  await other.goto(proxyUrl);
  await other.waitForSelector('#port-continue');
  assert.equal(new URL(other.url()).origin, new URL(server.url).origin);
  await other.click('#port-continue');
  await until('back at the app', async () => (await other.textContent('#out').catch(() => '')) === 'echo:hi');

  // A teammate sees the port but gets no Open button; asking anyway is refused.
  const mate = await signedIn(browser, server, cy);
  await mate.goto(`${server.url}/#/jobs/${id}`);
  await mate.waitForSelector('caption:text("Named ports")');
  assert.equal(await mate.locator('#port-open-web').count(), 0);
  await mate.goto(`${server.url}/#/jobs/${id}?port=web`);
  await mate.click('#port-continue');
  await until('the refusal', async () => /only its owner/.test(await mate.textContent('#status')));
  assert.equal(new URL(mate.url()).origin, new URL(server.url).origin);
  console.log('ports_browser: ok');
} finally {
  await browser.close();
  // The app would outlive the server: cancel it and wait for its end.
  if (id) {
    await call(server, ana, 'DELETE', `/v1/jobs/${id}`);
    await until('the app job\'s end', async () => ['cancelled', 'failed', 'succeeded'].includes((await call(server, ana, 'GET', `/v1/jobs/${id}`)).body.state));
  }
  await server.stop();
  rmSync(app, { force: true });
}
