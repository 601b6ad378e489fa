// Starts a real `gantry server` (standalone, fake GPUs) with two teams' users, talks to its
// API, and launches Debian's Chromium headless through playwright-core (no browser download).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function token() { return randomBytes(24).toString('hex'); }
const sha256 = (t) => createHash('sha256').update(t).digest('hex');

// `users`: [{name, team, role, token, node?}]; `quotas`: team_quotas.yaml text; `files`:
// more config files by name (identity.yaml...); `listen`: HOST:PORT (default: any port).
export async function startServer({ users, quotas = '', fakeGpus = '2x4xA100-80GB', extraArgs = [], files = {},
  listen = '127.0.0.1:0' }) {
  const binary = process.env.GANTRY_BINARY;
  if (!binary) throw new Error('GANTRY_BINARY is not set');
  const dir = mkdtempSync(join(tmpdir(), 'gantry-browser-'));
  const config = join(dir, 'config');
  mkdirSync(config);
  const teams = [...new Set(users.filter((u) => u.role !== 'agent' && u.role !== 'login-node').map((u) => u.team))];
  writeFileSync(join(config, 'users.yaml'), ['teams:',
    ...teams.map((t) => `  ${t}: {priorities: [high, medium, low], unix_account: nobody}`), 'users:',
    ...users.map((u) => `  - {name: ${u.name}, team: ${u.team}, role: ${u.role}${u.node ? `, node: ${u.node}` : ''}, token_sha256: ${sha256(u.token)}}`)].join('\n') + '\n');
  if (quotas) writeFileSync(join(config, 'team_quotas.yaml'), quotas);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(config, name), text, { mode: 0o600 });
  const ready = join(dir, 'ready');
  const log = join(dir, 'server.log');
  const args = ['server', '--standalone', '--fake-gpus', fakeGpus, '--listen', listen, '--config', config,
    '--data-dir', join(dir, 'data'), '--ready-file', ready, '--no-fsync', '--history-interval', '1', ...extraArgs];
  const proc = spawn(binary, args, { stdio: ['ignore', openSync(log, 'w'), openSync(log, 'a')] });
  for (let i = 0; i < 600 && !existsSync(ready); i++) await sleep(50);
  if (!existsSync(ready)) throw new Error(`server did not start: ${readFileSync(log, 'utf8')}`);
  const url = readFileSync(ready, 'utf8').trim();
  const admin = readFileSync(join(dir, 'data', 'admin.token'), 'utf8').trim();
  return {
    url, admin, dir, log,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => { if (proc.exitCode !== null) r(); else proc.on('exit', r); });
      if (!process.env.GANTRY_KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A TCP port free on 127.0.0.1 now (for a server whose address must be known before it starts).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// The REST API with a token: {status, body}.
export async function call(server, tok, method, path, body) {
  const res = await fetch(server.url + path, {
    method, headers: { Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = text;
  try { parsed = JSON.parse(text); } catch { /* text answers */ }
  return { status: res.status, body: parsed };
}

export async function launchBrowser() {
  return chromium.launch({ executablePath: process.env.GANTRY_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
}

// A tab signed in with `tok` (the sign-in form, as a person would).
export async function signedIn(browser, server, tok) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(server.url + '/');
  await page.fill('#token', tok);
  await page.click('form.signin button[type=submit]');
  await page.waitForSelector('#nav:not([hidden])');
  return page;
}

// Waits until `fn` (async, returning truthy) holds, polling; fails with `what` after `ms`.
export async function until(what, fn, ms = 30000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { if (await fn()) return; } catch (e) { last = e; }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

export function screenshotDir() {
  const d = process.env.GANTRY_SCREENSHOTS || join(tmpdir(), 'gantry-screenshots');
  mkdirSync(d, { recursive: true });
  return d;
}
