import { list } from '../api.js';
import { h, replace, rfc3339, errorBox, table, every } from '../dom.js';

// A user's API tokens: the caller's own (#/tokens), or, for an admin or
// the team-admin of a service account, that user's (#/tokens?user=NAME).
// Only records: a token itself is shown once, when it is made.
export function render(main, { query }, ctx) {
  const me = ctx.me ? ctx.me.name : '';
  const user = query.get('user') || me;
  const own = user === me;
  const box = h('div', { id: 'tokens' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  replace(main,
    ctx.me && ctx.me.admin && !own ? h('p', { class: 'crumbs' }, h('a', { href: '#/users' }, 'Users'), ' / ', user) : null,
    h('h1', {}, own ? 'My tokens' : 'Tokens of ' + user),
    h('p', { class: 'help' }, 'Each API token of ', own ? 'your account' : user, ': when it was made, when it expires, and whether it was revoked. ',
      'The token itself is shown once, when it is made, and never kept (only its hash is). Make one with ',
      h('code', {}, 'gpufleet token create'), ', revoke one with ', h('code', {}, 'gpufleet token revoke ID'), '.'),
    errBox, box);
  const ac = new AbortController();
  const stop = every(10000, async () => {
    try {
      const ts = (await list('/tokens?user=' + encodeURIComponent(user), { signal: ac.signal })).items;
      replace(errBox);
      const now = Date.now();
      replace(box, table('Tokens', ['ID', 'Name', 'Created', 'Expires', 'State'],
        ts.map((t) => ({
          attrs: { 'data-token': t.id },
          cells: [h('code', { class: 'token-id' }, t.id), t.name || h('span', { class: 'muted' }, '—'), rfc3339(t.createdAt),
            t.expiresAt ? rfc3339(t.expiresAt) : h('span', { class: 'muted' }, 'never'), state(t, now)],
        })), { empty: 'No token.', cls: 'tokens' }));
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the tokens of ' + user));
    }
  });
  return () => {
    stop();
    ac.abort();
  };
}

function state(t, now) {
  if (t.revokedAt) return h('span', {}, h('span', { class: 'badge bad' }, 'revoked'), ' ', rfc3339(t.revokedAt));
  if (t.expiresAt && Date.parse(t.expiresAt) <= now) return h('span', { class: 'badge warn' }, 'expired');
  return h('span', { class: 'badge ok' }, 'active');
}
