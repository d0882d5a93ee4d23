import { api } from '../api.js';
import { h, replace, ago, phase, errorBox, table, every, askGPUs, placement, workloadLink, clipped } from '../dom.js';

const PHASES = [
  ['Pending,Running', 'Active (pending or running)'],
  ['', 'Any phase'],
  ['Pending', 'Pending'],
  ['Running', 'Running'],
  ['Succeeded', 'Succeeded'],
  ['Failed', 'Failed'],
  ['Cancelled', 'Cancelled'],
];

// The filters live in the URL (#/workloads?team=a&phase=Running&...), so
// that a filtered list can be bookmarked and shared. Team, phase and owner
// are filtered by the server; priority here, as the API has no filter for
// it.
export function render(main, { query }) {
  const f = {
    team: query.get('team') || '',
    phase: query.has('phase') ? query.get('phase') : 'Pending,Running',
    priority: query.get('priority') || '',
    owner: query.get('owner') || '',
  };
  const teamSel = h('select', { id: 'f-team', name: 'team' }, h('option', { value: '' }, 'All my teams'));
  const phaseSel = h('select', { id: 'f-phase', name: 'phase' }, PHASES.map(([v, l]) => h('option', { value: v, selected: v === f.phase }, l)));
  const prioSel = h('select', { id: 'f-priority', name: 'priority' }, h('option', { value: '' }, 'Any priority'));
  const owner = h('input', { id: 'f-owner', name: 'owner', type: 'text', value: f.owner, placeholder: 'user name', autocomplete: 'off' });
  const auto = h('input', { id: 'f-auto', type: 'checkbox', checked: true });
  const box = h('div', { id: 'workload-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  const count = h('p', { class: 'help', 'aria-live': 'polite' });
  const more = h('div', {});
  if (f.team) teamSel.appendChild(h('option', { value: f.team, selected: true }, f.team));
  if (f.priority) prioSel.appendChild(h('option', { value: f.priority, selected: true }, f.priority));
  if (!PHASES.some(([v]) => v === f.phase)) phaseSel.appendChild(h('option', { value: f.phase, selected: true }, f.phase));

  let first = []; // the first page
  let extra = []; // pages read with "Load more"
  let nextToken = '';
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter workloads' },
    h('div', { class: 'field' }, h('label', { for: 'f-team' }, 'Team'), teamSel),
    h('div', { class: 'field' }, h('label', { for: 'f-phase' }, 'Phase'), phaseSel),
    h('div', { class: 'field' }, h('label', { for: 'f-priority' }, 'Priority'), prioSel),
    h('div', { class: 'field' }, h('label', { for: 'f-owner' }, 'Owner'), owner),
    h('div', { class: 'field' }, h('button', { type: 'submit' }, 'Apply')),
    h('div', { class: 'field check' }, auto, h('label', { for: 'f-auto' }, 'Refresh every 5 s')));

  // Applying the filters updates the URL in place (no new history entry,
  // no re-rendering), so that focus stays on the control just changed.
  const apply = () => {
    f.team = teamSel.value;
    f.phase = phaseSel.value;
    f.priority = prioSel.value;
    f.owner = owner.value.trim();
    const q = new URLSearchParams();
    if (f.team) q.set('team', f.team);
    q.set('phase', f.phase);
    if (f.priority) q.set('priority', f.priority);
    if (f.owner) q.set('owner', f.owner);
    history.replaceState(null, '', '#/workloads?' + q.toString());
    first = [];
    extra = [];
    nextToken = '';
    refresh(true);
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  for (const s of [teamSel, phaseSel, prioSel]) s.addEventListener('change', apply);

  replace(main,
    h('div', { class: 'page-head' }, h('h1', {}, 'Workloads'), h('a', { class: 'button primary', href: '#/submit' }, 'Submit a workload')),
    form, errBox, count, box, more);

  const ac = new AbortController();
  // Fill the team and priority choices.
  api('/teams', { signal: ac.signal }).then((ts) => {
    for (const t of ts.items) if (t.name !== f.team) teamSel.appendChild(h('option', { value: t.name }, t.name));
  }).catch(() => {});
  api('/priorityclasses', { signal: ac.signal }).then((ps) => {
    for (const p of ps.items) if (p.name !== f.priority) prioSel.appendChild(h('option', { value: p.name }, p.name));
  }).catch(() => {});

  const base = () => {
    const q = new URLSearchParams({ limit: '500' });
    if (f.team) q.set('team', f.team);
    if (f.phase) q.set('phase', f.phase);
    if (f.owner) q.set('owner', f.owner);
    return '/workloads?' + q.toString();
  };
  const show = () => {
    let ws = first.concat(extra);
    if (f.priority) ws = ws.filter((w) => w.priority === f.priority);
    ws = ws.slice().reverse(); // newest first
    count.textContent = `${ws.length} workload${ws.length === 1 ? '' : 's'}` + (nextToken ? ' shown; more match' : '');
    replace(box, table('Workloads', ['Workload', 'Phase', 'Team', 'Owner', 'Kind', 'Priority', 'GPUs', 'Placement', 'Created', 'Reason'],
      ws.map((w) => ({
        attrs: { 'data-id': w.id, 'data-phase': w.status.phase },
        cells: [
          workloadLink(w),
          phase(w.status.phase), w.team, w.owner, w.kind, w.priority, askGPUs(w), h('span', { class: 'place' }, placement(w)), ago(w.createdAt),
          clipped([w.status.reason, w.status.message].filter(Boolean).join(': '), ''),
        ],
      })), { empty: 'No workload matches these filters.', cls: 'workloads' }));
    replace(more, nextToken ? h('button', { type: 'button', onclick: loadMore }, 'Load more') : null);
  };
  async function loadMore() {
    try {
      const out = await api(base() + '&pageToken=' + encodeURIComponent(nextToken), { signal: ac.signal });
      extra = extra.concat(out.items);
      nextToken = out.nextPageToken || '';
      show();
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read more workloads'));
    }
  }
  const refresh = async (now) => {
    if (!now && !auto.checked && first.length) return;
    try {
      const out = await api(base(), { signal: ac.signal });
      first = out.items;
      if (!extra.length) nextToken = out.nextPageToken || '';
      replace(errBox);
      show();
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the workloads'));
    }
  };
  const stop = every(5000, refresh);
  return () => {
    stop();
    ac.abort();
  };
}
