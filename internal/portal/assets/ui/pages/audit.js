import { list } from '../api.js';
import { h, replace, rfc3339, errorBox, table, every, clipped } from '../dom.js';

const SINCE = [['1h', 'Last hour', 3600], ['24h', 'Last 24 hours', 86400], ['7d', 'Last 7 days', 7 * 86400], ['30d', 'Last 30 days', 30 * 86400], ['all', 'Everything', 0]];
const MAX = 2000;

// The audit trail (admins only): every mutating request, who made it in
// what role, on what, and the status answered; newest first. The filters
// (user, since) go to the API and into the URL.
export function render(main, { query }, ctx) {
  const f = { user: query.get('user') || '', since: SINCE.some(([v]) => v === query.get('since')) ? query.get('since') : '24h' };
  const user = h('input', { id: 'a-user', name: 'user', type: 'text', value: f.user, placeholder: 'user name', autocomplete: 'off' });
  const since = h('select', { id: 'a-since', name: 'since' }, SINCE.map(([v, l]) => h('option', { value: v, selected: v === f.since }, l)));
  const box = h('div', { id: 'audit' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  const count = h('p', { class: 'help', 'aria-live': 'polite' });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit trail' },
    h('div', { class: 'field' }, h('label', { for: 'a-user' }, 'User'), user),
    h('div', { class: 'field' }, h('label', { for: 'a-since' }, 'Since'), since),
    h('div', { class: 'field' }, h('button', { type: 'submit' }, 'Apply')));
  replace(main,
    h('h1', {}, 'Audit trail'),
    h('p', { class: 'help' }, 'Every request that changed something (submit, cancel, teams, members, users, tokens), refused ones included: who, in what role, what, and the answer. Newest first. The CLI\'s ',
      h('code', {}, 'gpufleet audit'), ' reads the same.'),
    form, errBox, count, box);
  if (!ctx.me || !ctx.me.admin) {
    replace(box, h('p', {}, 'Only admins may read the audit trail.'));
    return null;
  }
  const ac = new AbortController();
  const refresh = async () => {
    try {
      const q = new URLSearchParams({ limit: '500' });
      if (f.user) q.set('user', f.user);
      const secs = SINCE.find(([v]) => v === f.since)[2];
      if (secs) q.set('since', new Date(Date.now() - secs * 1000).toISOString().replace(/\.\d+Z$/, 'Z'));
      const { items, more } = await list('/audit?' + q.toString(), { signal: ac.signal, max: MAX });
      replace(errBox);
      const es = items.slice().reverse();
      count.textContent = `${es.length} entr${es.length === 1 ? 'y' : 'ies'}` + (more ? `: the oldest ${MAX} of the period; narrow the filters to see the newest` : '');
      replace(box, table('Audit trail', ['Time', 'User', 'Role', 'Action', 'Object', 'Team', 'Answer', 'Message'],
        es.map((e) => ({
          attrs: { 'data-audit': String(e.id), class: e.status >= 400 ? 'warning' : '' },
          cells: [rfc3339(e.time), e.user, e.role || '', h('span', { class: 'nowrap', title: e.method + ' ' + e.path }, e.action), e.object ? h('span', { class: 'wid' }, e.object) : '',
            e.team || '', h('span', { class: 'badge ' + (e.status >= 400 ? 'bad' : 'ok') }, String(e.status)), clipped(e.message, '')],
        })), { empty: 'Nothing in this period.', cls: 'audit' }));
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the audit trail'));
    }
  };
  const apply = () => {
    f.user = user.value.trim();
    f.since = since.value;
    const q = new URLSearchParams();
    if (f.user) q.set('user', f.user);
    q.set('since', f.since);
    history.replaceState(null, '', '#/audit?' + q.toString());
    refresh();
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  since.addEventListener('change', apply);
  const stop = every(10000, refresh);
  return () => {
    stop();
    ac.abort();
  };
}
