// The dashboard's shell: sign-in (single sign-on through the server's identity provider,
// or a token kept in session storage), the hash router, and polling for live pages. Each page is a module under pages/ with render(main, params, ctx).
import { api, h, refreshSession, session } from './lib.js';
import * as overview from './pages/overview.js';
import * as queue from './pages/queue.js';
import * as jobs from './pages/jobs.js';
import * as job from './pages/job.js';
import * as nodes from './pages/nodes.js';
import * as usage from './pages/usage.js';

const routes = [
  [/^#?\/?$/, overview, 'Overview'],
  [/^#\/queue$/, queue, 'Queue'],
  [/^#\/jobs$/, jobs, 'Jobs'],
  [/^#\/jobs\/([^/?]+)(?:\?port=([a-z0-9_]+))?$/, job, 'Job'], // ?port=NAME: come to open that port
  [/^#\/nodes$/, nodes, 'Nodes'],
  [/^#\/usage$/, usage, 'Usage and bills'],
];

const main = document.getElementById('main');
const statusLine = document.getElementById('status');
let timers = [];
let generation = 0;

function stopTimers() {
  timers.forEach(clearInterval);
  timers = [];
}

export function showError(e) {
  statusLine.textContent = e ? String(e.message || e) : '';
}

// Polls `fn` every `ms` while the page is shown and the tab visible.
function every(gen, ms, fn) {
  timers.push(setInterval(() => {
    if (gen === generation && !document.hidden) fn().then(() => showError(null), showError);
  }, ms));
}

let authConfig = { oidc: false };

function signIn(message) {
  stopTimers();
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const next = location.hash && location.hash !== '#/' ? `?next=${encodeURIComponent(location.hash)}` : '';
  const form = h('form', { class: 'signin card' },
    h('h1', {}, 'Sign in to Gantry'),
    authConfig.oidc ? [
      h('a', { id: 'sso', class: 'button', href: `/auth/login${next}` }, 'Sign in with single sign-on'),
      h('p', { class: 'muted' }, `Your organisation's identity provider (${authConfig.issuer}).`),
      h('p', { class: 'muted' }, 'Or, with a token:')] : [],
    h('label', { for: 'token' }, 'API token'), input,
    h('p', { class: 'muted' }, 'The token from `gantry server` (admin.token) or the one your admin gave you. It is kept in this tab only.'),
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    session.token = input.value.trim();
    try {
      await start();
    } catch (e) {
      session.token = '';
      signIn(`Sign-in failed: ${e.message}`);
    }
  });
  main.replaceChildren(form);
  showError(message);
  input.focus();
}

async function route() {
  stopTimers();
  const gen = ++generation;
  const hash = location.hash || '#/';
  for (const [re, page, title] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    document.title = `${title} · Gantry`;
    for (const a of document.querySelectorAll('#nav a')) {
      const base = a.getAttribute('href');
      a.classList.toggle('current', base === '#/' ? hash === '#/' || hash === '' : hash.startsWith(base));
      if (a.classList.contains('current')) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    main.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
    showError(null);
    const t0 = performance.now();
    try {
      await page.render(main, m.slice(1).map((x) => (x === undefined ? undefined : decodeURIComponent(x))), { every: (ms, fn) => every(gen, ms, fn), showError });
      if (gen === generation) {
        main.dataset.loadedMs = String(Math.round(performance.now() - t0));
        main.dataset.page = title;
      }
    } catch (e) {
      if (gen === generation) main.replaceChildren(h('p', { class: 'status' }, e.message));
    }
    main.focus();
    return;
  }
  main.replaceChildren(h('p', {}, 'No such page.'));
}

// A member of several teams picks the one the pages show (and act for).
function teamPicker(who) {
  document.getElementById('team-pick')?.remove();
  const teams = [...(who.teams || [])].sort();
  if (teams.length < 2) return;
  const pick = h('select', { id: 'team-pick', 'aria-label': 'Team' },
    teams.map((t) => h('option', { value: t, selected: t === who.team }, `team ${t}`)));
  pick.addEventListener('change', () => { session.team = pick.value; start().catch(showError); });
  document.getElementById('who').prepend(pick);
}

async function start() {
  session.who = await api('/v1/whoami');
  document.getElementById('who-name').textContent =
    `${session.who.user} · ${session.who.role}${session.who.team ? ` · team ${session.who.team}` : ''}`;
  teamPicker(session.who);
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  await route();
}

document.getElementById('sign-out').addEventListener('click', async () => {
  // A provider sign-in ends at the server too (its session revoked, its cookie cleared).
  if (session.sso) {
    await fetch('/v1/auth/logout', { method: 'POST', headers: { Authorization: `Bearer ${session.token}` } }).catch(() => null);
  }
  session.token = '';
  session.sso = false;
  session.team = '';
  session.who = null;
  signIn('Signed out.');
});
window.addEventListener('gantry:signed-out', () => signIn(session.refusal || 'Your token was refused: sign in again.'));
window.addEventListener('hashchange', () => { if (session.who) route(); });

async function boot() {
  authConfig = await fetch('/v1/auth/config').then((r) => r.json()).catch(() => ({ oidc: false }));
  // Back from the provider (or a new tab): the session's cookie gives an access token.
  if (!session.token && authConfig.oidc && await refreshSession()) return start();
  if (session.token) return start();
  return signIn(session.refusal);
}
boot().catch(() => signIn(''));
