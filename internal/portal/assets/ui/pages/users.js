import { list } from '../api.js';
import { h, replace, rfc3339, errorBox, table, every } from '../dom.js';

// The users (admins only: the API answers GET /users to admins alone),
// each with its teams and roles, and a link to its tokens.
export function render(main, { query }, ctx) {
  const box = h('div', { id: 'users' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  const find = h('input', { id: 'u-find', name: 'find', type: 'search', value: query.get('find') || '', placeholder: 'name or team', autocomplete: 'off' });
  const count = h('p', { class: 'help', 'aria-live': 'polite' });
  replace(main,
    h('h1', {}, 'Users'),
    h('p', { class: 'help' }, 'Every account: people, service accounts (for pipelines) and metrics readers (for a scraper), with their teams and roles. ',
      'A viewer reads its teams\' workloads, a member also submits and cancels, a team-admin also manages members. Make users with ',
      h('code', {}, 'gpufleet create user'), '.'),
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter users' },
      h('div', { class: 'field' }, h('label', { for: 'u-find' }, 'Find'), find)),
    errBox, count, box);
  if (!ctx.me || !ctx.me.admin) {
    replace(box, h('p', {}, 'Only admins may list the users. Your own account\'s tokens are on ', h('a', { href: '#/tokens' }, 'Tokens'), '.'));
    return null;
  }
  let all = [];
  const show = () => {
    const q = find.value.trim().toLowerCase();
    const us = q ? all.filter((u) => u.name.toLowerCase().includes(q) || (u.teams || []).some((t) => t.toLowerCase().includes(q))) : all;
    count.textContent = `${us.length} user${us.length === 1 ? '' : 's'}` + (q ? ` match “${find.value.trim()}”` : '');
    replace(box, table('Users', ['User', 'Kind', 'Teams and roles', 'Created', 'Tokens'],
      us.map((u) => ({
        attrs: { 'data-user': u.name },
        cells: [
          h('strong', {}, u.name),
          kind(u),
          (u.memberships || []).length ? h('ul', { class: 'plain' }, u.memberships.map((m) => h('li', {},
            h('a', { href: '#/workloads?team=' + encodeURIComponent(m.team) + '&phase=' }, m.team), ' ', h('span', { class: 'badge' }, m.role))))
            : h('span', { class: 'muted' }, u.admin ? 'every team (admin)' : 'no team'),
          rfc3339(u.createdAt),
          h('a', { href: '#/tokens?user=' + encodeURIComponent(u.name), 'aria-label': 'Tokens of ' + u.name }, 'Tokens'),
        ],
      })), { empty: 'No user matches.', cls: 'users' }));
  };
  find.addEventListener('input', show);
  find.form.addEventListener('submit', (ev) => ev.preventDefault());
  const ac = new AbortController();
  const stop = every(10000, async () => {
    try {
      all = (await list('/users?limit=500', { signal: ac.signal })).items;
      all.sort((a, b) => a.name.localeCompare(b.name));
      replace(errBox);
      show();
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the users'));
    }
  });
  return () => {
    stop();
    ac.abort();
  };
}

function kind(u) {
  if (u.admin) return h('span', { class: 'badge info' }, 'admin');
  if (u.metricsReader) return h('span', { class: 'badge' }, 'metrics reader');
  if (u.serviceAccount) return h('span', { class: 'badge' }, 'service account');
  return 'person';
}
