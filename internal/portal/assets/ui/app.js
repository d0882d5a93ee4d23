// The portal: a single page routed by the URL's fragment (#/workloads,
// #/workloads/ID, ...). Each page module renders into <main> and returns a
// function that stops its timers and streams when the page is left.

import { api, token, setToken, onUnauthenticated } from './api.js';
import { h, replace } from './dom.js';
import * as signin from './pages/signin.js';
import * as dashboard from './pages/dashboard.js';
import * as workloads from './pages/workloads.js';
import * as workload from './pages/workload.js';
import * as submit from './pages/submit.js';
import * as nodes from './pages/nodes.js';
import * as teams from './pages/teams.js';
import * as users from './pages/users.js';
import * as tokens from './pages/tokens.js';
import * as audit from './pages/audit.js';
import * as cost from './pages/cost.js'; // the Cost page (issue 15)
import * as node from './pages/node.js'; // a node's page (issue 16)
import * as acceptance from './pages/acceptance.js'; // acceptance runs (issue 18)
import * as pools from './pages/pools.js'; // clusters and pools (issue 19)

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const whoName = document.getElementById('who-name');
const banner = document.getElementById('banner');

// ctx is what pages share: the signed-in user, and navigation.
const ctx = {
  me: null,
  go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  },
};

let leave = null;
// flash is a message for the next page shown (after signing out).
let flash = '';

// parse splits "#/workloads/wl-1?team=a" into route, id and query.
function parse() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?', 2);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query: new URLSearchParams(qs || '') };
}

function page(parts) {
  if (!parts.length) return ['dashboard', dashboard];
  switch (parts[0]) {
    case 'workloads':
      return parts.length > 1 ? ['workloads', workload] : ['workloads', workloads];
    case 'submit':
      return ['submit', submit];
    case 'nodes': // #/nodes/NAME is a node's page (issue 16)
      return parts.length > 1 ? ['nodes', node] : ['nodes', nodes];
    case 'pools': // clusters and pools (issue 19)
      return ['pools', pools];
    case 'teams':
      return ['teams', teams];
    case 'users':
      return ['users', users];
    case 'tokens':
      return ['tokens', tokens];
    case 'audit':
      return ['audit', audit];
    case 'cost': // the Cost page (issue 15)
      return ['cost', cost];
    case 'acceptance': // #/acceptance/ID is one run (issue 18)
      return ['acceptance', acceptance];
    case 'signin':
      return ['signin', signin];
  }
  return [null, null];
}

async function route() {
  if (leave) {
    leave();
    leave = null;
  }
  banner.hidden = !flash;
  banner.textContent = flash;
  flash = '';
  const { parts, query } = parse();
  if (!token()) {
    showSignedIn(false);
    leave = signin.render(main, { query, next: location.hash && location.hash !== '#/signin' ? location.hash : '#/' }, ctx);
    document.title = 'Sign in · gpufleet';
    return;
  }
  if (!ctx.me) {
    try {
      ctx.me = await api('/whoami');
    } catch (e) {
      if (e.status === 401) return; // onUnauthenticated has routed to sign-in
      replace(main, h('div', { class: 'error', role: 'alert' }, 'Cannot read who you are: ' + e.message));
      return;
    }
  }
  showSignedIn(true);
  const [name, mod] = page(parts);
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.route === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (name === 'signin') return ctx.go('#/');
  if (!mod) {
    // An unknown route: say so, with its own title, rather than keep the
    // previous page's.
    replace(main, h('h1', { id: 'not-found' }, 'Not found'),
      h('p', {}, 'There is no page at ', h('code', {}, location.hash), '. ', h('a', { href: '#/' }, 'Go to the dashboard'), ', or choose a page in the menu.'));
  } else {
    leave = mod.render(main, { parts, query }, ctx) || null;
  }
  // Move focus to the new page, as a page load would, so that keyboard
  // and screen reader users start at its top.
  const h1 = main.querySelector('h1');
  if (h1) {
    h1.setAttribute('tabindex', '-1');
    h1.focus({ preventScroll: true });
    document.title = h1.textContent + ' · gpufleet';
  }
}

function showSignedIn(yes) {
  nav.hidden = !yes;
  // Pages only admins may use (the API refuses them to others).
  for (const li of nav.querySelectorAll('[data-admin]')) li.hidden = !(yes && ctx.me && ctx.me.admin);
  who.hidden = !yes;
  whoName.textContent = yes && ctx.me ? 'Signed in as ' + ctx.me.name + (ctx.me.admin ? ' (admin)' : '') : '';
}

function signOut(message) {
  setToken('');
  ctx.me = null;
  if (leave) {
    leave();
    leave = null;
  }
  flash = message || '';
  ctx.go('#/signin');
}

onUnauthenticated(() => signOut('Your token is no longer accepted (revoked or expired, or the server was reset): sign in again.'));
document.getElementById('signout').addEventListener('click', () => signOut('Signed out.'));
ctx.signedIn = (me) => {
  ctx.me = me;
};
window.addEventListener('hashchange', route);
route();
