// The node page (#/nodes/NAME, issue 16): the node's lifecycle state and
// why, each GPU's health and why, a timeline of its state changes and
// health events, the evidence of its qualification runs (each command's
// raw output folded), and, for admins, cordon, drain, uncordon and
// validate. Everything comes from GET /api/v1/nodes/NAME, its /events and
// its /evidence; the buttons POST to the routes of the same names.

import { api } from '../api.js';
import { h, replace, gpus, mib, ago, rfc3339, errorBox, dl, every, duration } from '../dom.js';

const REFRESH_MS = 3000;
// At most this many events are listed; the strip still spans them all.
const MAX_EVENTS = 200;

// The badge class of each node state and GPU health.
const STATE_CLASS = { Ready: 'ok', Registering: 'info', Validating: 'info', Cordoned: 'warn', Draining: 'warn', Failed: 'bad', Lost: 'bad' };
const HEALTH_CLASS = { Healthy: 'ok', Suspect: 'warn', Failed: 'bad' };
// Counts of GPUs by health say the worst first.
const HEALTH_ORDER = ['Failed', 'Suspect', 'Healthy', 'Unknown'];

// stateBadge is a node state's badge, its reason and message as title.
export function stateBadge(n, attrs = {}) {
  const s = n.state || 'Unknown';
  const why = [n.stateReason, n.stateMessage].filter(Boolean).join(': ');
  return h('span', Object.assign({ class: 'badge ' + (STATE_CLASS[s] || ''), 'data-state': s, title: why || null }, attrs), s);
}

// healthBadge is a GPU's health badge, its reason and message as title.
export function healthBadge(g) {
  const s = g.health || 'Unknown';
  const why = [g.healthReason, g.healthMessage].filter(Boolean).join(': ');
  return h('span', { class: 'badge health ' + (HEALTH_CLASS[s] || ''), 'data-health': s, title: why || null }, s);
}

export function render(main, { parts }, ctx) {
  const name = parts[1];
  const path = '/nodes/' + encodeURIComponent(name);
  const admin = !!(ctx.me && ctx.me.admin);

  const stateBox = h('span', { id: 'node-state-box' });
  const actions = h('div', { class: 'actions', id: 'node-actions' });
  const actionMsg = h('div', { id: 'action-error', 'aria-live': 'polite' });
  const errBox = h('div', {});
  const statusBox = h('div', { id: 'node-status' }, h('p', { class: 'muted' }, 'Loading…'));
  const gpuBox = h('div', { id: 'node-gpus' });
  const timelineBox = h('div', { id: 'timeline' });
  const evidenceBox = h('div', { id: 'evidence' });
  const drainDialog = admin ? drainConfirm(name, (grace) => act('drain', grace ? { grace } : undefined)) : null;
  const level = h('select', { id: 'validate-level', name: 'level' },
    [['1', '1 (seconds)'], ['2', '2 (about 2 minutes)'], ['3', '3 (about 15 minutes)']].map(([v, t]) => h('option', { value: v }, t)));

  replace(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/nodes' }, 'Nodes'), ' / ', name),
    h('div', { class: 'page-head' }, h('div', { class: 'title-row' }, h('h1', {}, name), stateBox), actions),
    actionMsg, errBox,
    h('div', { class: 'cols' },
      h('section', { class: 'card', 'aria-labelledby': 'node-status-h' }, h('h2', { id: 'node-status-h' }, 'State'), statusBox),
      h('section', { class: 'card', 'aria-labelledby': 'node-gpus-h' }, h('h2', { id: 'node-gpus-h' }, 'GPU health'), gpuBox)),
    h('section', { class: 'card', 'aria-labelledby': 'timeline-h' },
      h('div', { class: 'section-head' }, h('h2', { id: 'timeline-h' }, 'Health timeline'),
        h('span', { class: 'help' }, 'The node\'s state over time, and every change of it or of a GPU\'s health, oldest first.')),
      timelineBox),
    h('section', { class: 'card', 'aria-labelledby': 'evidence-h' },
      h('div', { class: 'section-head' }, h('h2', { id: 'evidence-h' }, 'Qualification evidence'),
        h('span', { class: 'help' }, 'What each qualification ran (no shell), what it printed and what the check found; the latest run first.')),
      evidenceBox),
    drainDialog);

  const ac = new AbortController();
  let node = null;
  let seq = 0;
  let evidenceKey = '';
  let busy = false;
  // actedOn is the stateSince an action answered: its message goes once
  // the node's state changes again.
  let actedOn = null;

  async function refresh() {
    const mine = ++seq;
    try {
      const [n, evs, evid] = await Promise.all([
        api(path, { signal: ac.signal }),
        api(path + '/events', { signal: ac.signal }),
        api(path + '/evidence', { signal: ac.signal }),
      ]);
      if (mine !== seq) return; // a later refresh (after an action) answers
      node = n;
      replace(errBox);
      show(n, evs.items || [], evid.items || []);
    } catch (e) {
      if (e.name === 'AbortError' || mine !== seq) return;
      if (e.status === 404 && !node) {
        ac.abort();
        replace(main, h('p', { class: 'crumbs' }, h('a', { href: '#/nodes' }, 'Nodes'), ' / ', name),
          h('h1', {}, name),
          errorBox(e, 'No such node'),
          h('p', {}, h('a', { href: '#/nodes' }, 'Back to the nodes')));
        return;
      }
      replace(errBox, errorBox(e, 'Cannot read the node'));
    }
  }

  function show(n, evs, evid) {
    replace(stateBox, stateBadge(n, { id: 'node-state' }));
    if (actedOn && n.stateSince !== actedOn) {
      actedOn = null;
      replace(actionMsg);
    }
    if (admin) showActions(n);
    const latest = evid.length ? evid[evid.length - 1] : null;
    replace(statusBox, dl([
      ['State', stateBadge(n)],
      ['Reason', n.stateReason || null],
      ['Message', n.stateMessage ? h('span', { id: 'node-state-message' }, n.stateMessage) : null],
      ['Since', n.stateSince ? rfc3339(n.stateSince) : null],
      ['Takes work', n.schedulable ? 'yes' : h('span', { class: 'warn-text' }, 'no')],
      ['Qualification asked', n.validation ? h('span', { id: 'node-validation' }, 'level ' + n.validation.level + (n.validation.requestedBy ? ' by ' + n.validation.requestedBy : '') + ': ' + (n.validation.waits || '')) : null],
      ['Last qualified', n.lastQualified ? [rfc3339(n.lastQualified), latest && latest.simulated ? [' ', h('span', { class: 'badge warn simulated', id: 'qualified-simulated' }, 'Simulated')] : null]
        : h('span', { class: 'muted' }, 'never')],
      ['Pool', n.pool || null],
      ['Region', n.region || null],
      ['CPUs', n.cpu ? String(n.cpu) : null],
      ['Memory', n.memoryMiB ? mib(n.memoryMiB) : null],
      ['Isolation', n.isolation || null],
      ['Driver', latest && latest.driverVersion ? latest.driverVersion : null],
      ['DCGM', latest && latest.dcgmVersion ? latest.dcgmVersion : null],
      ['Last reported', n.updatedAt ? ago(n.updatedAt) : null],
    ]));
    replace(gpuBox, gpuTable(n));
    replace(timelineBox, timeline(evs));
    // The evidence is re-drawn only when it changed, so that a folded
    // output the user opened stays open.
    const key = evid.length + '/' + (latest ? latest.run + latest.result : '');
    if (key !== evidenceKey) {
      evidenceKey = key;
      const open = new Set([...evidenceBox.querySelectorAll('details[open]')].map((d) => d.dataset.key));
      replace(evidenceBox, evidence(evid));
      for (const d of evidenceBox.querySelectorAll('details')) if (open.has(d.dataset.key)) d.open = true;
    }
  }

  // showActions offers what the node's state allows.
  function showActions(n) {
    const s = n.state;
    const want = [];
    if (s === 'Ready') want.push('cordon');
    if (s === 'Ready' || s === 'Cordoned') want.push('drain');
    if (s === 'Cordoned' || s === 'Draining') want.push('uncordon');
    if (s !== 'Validating' && s !== 'Registering') want.push('validate');
    const have = [...actions.querySelectorAll('button')].map((b) => b.dataset.verb).join(',');
    if (have === want.join(',')) {
      for (const b of actions.querySelectorAll('button')) b.disabled = busy;
      return;
    }
    const focused = actions.contains(document.activeElement);
    const buttons = {
      cordon: h('button', { type: 'button', id: 'node-cordon', 'data-verb': 'cordon', title: 'No new work lands on it; what runs there stays', onclick: () => act('cordon') }, 'Cordon'),
      drain: h('button', { type: 'button', id: 'node-drain', class: 'danger', 'data-verb': 'drain', title: 'Stop and requeue its running work, then cordon it', onclick: () => drainDialog.showModal() }, 'Drain…'),
      uncordon: h('button', { type: 'button', id: 'node-uncordon', class: 'primary', 'data-verb': 'uncordon', title: 'Return it to service', onclick: () => act('uncordon') }, 'Uncordon'),
      validate: h('button', { type: 'button', id: 'node-validate', 'data-verb': 'validate', title: 'Qualify it again: the diagnostics take its GPUs while they run', onclick: () => act('validate', { level: Number(level.value) }) }, 'Validate'),
    };
    replace(actions, want.map((v) => v === 'validate'
      ? [h('span', { class: 'inline' }, h('label', { for: 'validate-level' }, 'Level'), level), buttons.validate]
      : buttons[v]));
    for (const b of actions.querySelectorAll('button')) b.disabled = busy;
    // Keep the keyboard in the actions when the button pressed is gone.
    if (focused && !actions.contains(document.activeElement)) {
      const first = actions.querySelector('button');
      if (first) first.focus();
    }
  }

  async function act(verb, body) {
    busy = true;
    for (const b of actions.querySelectorAll('button')) b.disabled = true;
    replace(actionMsg);
    try {
      const n = await api(path + '/' + verb, { method: 'POST', body, signal: ac.signal });
      replace(actionMsg, h('p', { class: 'ok', role: 'status' }, done(verb, n)));
      actedOn = n && n.stateSince;
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(actionMsg, errorBox(e, 'Cannot ' + verb + ' ' + name));
    } finally {
      busy = false;
    }
    await refresh();
  }

  const stop = every(REFRESH_MS, refresh);
  return () => {
    stop();
    ac.abort();
    if (drainDialog && drainDialog.open) drainDialog.close();
  };
}

function done(verb, n) {
  const st = n && n.state ? ': it is ' + n.state + (n.stateMessage ? ' (' + n.stateMessage + ')' : '') : '';
  return { cordon: 'Cordoned', drain: 'Draining', uncordon: 'Uncordoned', validate: 'Qualification requested' }[verb] + st + '.';
}

function gpuTable(n) {
  if (!n.gpus.length) return h('p', { class: 'muted empty' }, 'This node has no GPU.');
  const counts = {};
  for (const g of n.gpus) counts[g.health || 'Unknown'] = (counts[g.health || 'Unknown'] || 0) + 1;
  return [
    h('p', { class: 'help', id: 'health-summary' }, Object.entries(counts).sort((a, b) => HEALTH_ORDER.indexOf(a[0]) - HEALTH_ORDER.indexOf(b[0]))
      .map(([k, v]) => v + ' ' + k).join(', ')),
    h('div', { class: 'table-wrap' }, h('table', { class: 'node-gpus' },
      h('caption', { class: 'sr-only' }, 'GPUs of ' + n.name + ' and their health'),
      h('thead', {}, h('tr', {}, ['GPU', 'Model', 'Health', 'Allocated'].map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, n.gpus.map((g) => h('tr', { 'data-gpu': String(g.index), class: g.health === 'Failed' ? 'failed' : null },
        h('td', {}, String(g.index), h('br'), h('code', { class: 'small muted', title: g.uuid }, g.uuid.length > 16 ? g.uuid.slice(0, 16) + '…' : g.uuid)),
        h('td', {}, g.model, g.simulated ? h('span', { class: 'badge info', title: 'a simulated GPU: no device behind it' }, 'simulated') : null,
          g.domain ? h('div', { class: 'small muted' }, 'NVLink domain ' + g.domain) : null),
        h('td', {}, healthBadge(g),
          g.healthReason ? h('div', { class: 'health-reason' }, h('strong', {}, g.healthReason), g.healthMessage ? ': ' + g.healthMessage : '') : null),
        h('td', { class: 'nowrap' }, g.allocatedMilliGPU ? gpus(g.allocatedMilliGPU) + ' GPU' : h('span', { class: 'muted' }, 'free'))))))),
  ];
}

// timeline draws the node's states as a strip over time (a segment per
// state, from its first event to now, Warning events marked on it) and
// lists the events.
function timeline(evs) {
  if (!evs.length) return h('p', { class: 'muted empty' }, 'No event yet.');
  const t0 = Date.parse(evs[0].time);
  const now = Math.max(Date.now(), Date.parse(evs[evs.length - 1].time));
  const span = Math.max(1, now - t0);
  const at = (t) => ((Date.parse(t) - t0) / span * 100);
  const segs = [];
  for (const e of evs) {
    if (!e.to) continue;
    if (segs.length) segs[segs.length - 1].end = e.time;
    segs.push({ state: e.to, start: e.time, end: null, reason: e.reason });
  }
  const strip = h('div', { class: 'tl-strip', role: 'img', 'aria-label': 'States over time: ' + (segs.map((s) => s.state).join(' → ') || 'none') });
  for (const s of segs) {
    const el = h('span', { class: 'tl-seg ns-' + s.state.toLowerCase(), 'data-state': s.state,
      title: s.state + ' (' + s.reason + ') from ' + s.start + (s.end ? ' to ' + s.end : ', now') });
    const left = at(s.start);
    const right = s.end ? at(s.end) : 100;
    el.style.left = left.toFixed(2) + '%';
    // At least a sliver, so that a state that lasted milliseconds shows.
    el.style.width = Math.max(0.6, right - left).toFixed(2) + '%';
    strip.appendChild(el);
  }
  for (const e of evs) {
    if (e.type !== 'Warning') continue;
    const mk = h('span', { class: 'tl-mark', 'data-gpu': e.gpu === undefined ? null : String(e.gpu),
      title: e.time + ' ' + (e.gpu === undefined ? '' : 'GPU ' + e.gpu + ' ') + e.reason + ': ' + e.message });
    mk.style.left = at(e.time).toFixed(2) + '%';
    strip.appendChild(mk);
  }
  const states = [...new Set(segs.map((s) => s.state))];
  const shown = evs.slice(-MAX_EVENTS);
  return [
    strip,
    h('p', { class: 'bar-scale' }, h('span', {}, h('time', { datetime: evs[0].time, title: evs[0].time }, new Date(t0).toISOString().replace(/\.\d+Z$/, 'Z'))),
      h('span', {}, 'spans ' + duration(span / 1000)), h('span', {}, 'now')),
    h('ul', { class: 'legend' }, states.map((s) => h('li', {}, h('span', { class: 'swatch tl-swatch ns-' + s.toLowerCase() }), s)),
      evs.some((e) => e.type === 'Warning') ? h('li', {}, h('span', { class: 'swatch tl-swatch-mark' }), 'warning') : null),
    evs.length > shown.length ? h('p', { class: 'help' }, `The last ${shown.length} of ${evs.length} events:`) : null,
    h('ol', { class: 'timeline', 'aria-label': 'Events of the node, oldest first' }, shown.map((e) => h('li', {
      class: e.type === 'Warning' ? 'warning' : null, 'data-reason': e.reason, 'data-to': e.to || null, 'data-gpu': e.gpu === undefined ? null : String(e.gpu),
    },
    h('span', { class: 'tl-time' }, rfc3339(e.time)),
    h('span', { class: 'tl-what' },
      e.gpu === undefined ? null : h('span', { class: 'badge info tl-gpu' }, 'GPU ' + e.gpu),
      e.type === 'Warning' ? h('span', { class: 'badge warn' }, 'Warning') : null,
      h('strong', { class: 'tl-reason' }, e.reason),
      e.to ? h('span', { class: 'tl-change' }, ' ', e.from ? [h('span', { class: 'tl-from' }, e.from), ' → '] : null, h('span', { class: 'tl-to' }, e.to)) : null,
      e.by ? h('span', { class: 'muted small' }, ' by ' + e.by) : null),
    h('span', { class: 'tl-msg' }, e.message)))),
  ];
}

// evidence lists the qualification runs, the latest first and open, each
// command with its result and its raw output folded in a <details>.
function evidence(items) {
  if (!items.length) return h('p', { class: 'muted empty' }, 'No qualification has run on this node.');
  const runs = [];
  const byRun = new Map();
  for (const e of items) {
    if (!byRun.has(e.run)) {
      byRun.set(e.run, []);
      runs.push(e.run);
    }
    byRun.get(e.run).push(e);
  }
  runs.reverse();
  return runs.map((run, i) => {
    const es = byRun.get(run);
    const failed = es.filter((e) => e.result === 'Fail').length;
    const diag = es.find((e) => e.command[0] === 'dcgmi' && e.command[1] === 'diag');
    const r = diag ? diag.command.indexOf('-r') : -1;
    const lvl = r >= 0 ? diag.command[r + 1] : null;
    const head = h('span', { class: 'run-head' },
      h('strong', {}, i === 0 ? 'Latest run' : 'Run'), ' ', h('code', { class: 'small' }, run), ' · ', rfc3339(es[0].startedAt),
      lvl ? ' · level ' + lvl : '', es.some((e) => e.simulated) ? h('span', { class: 'badge warn simulated', title: 'Evidence of simulated devices: not a qualification' }, 'Simulated') : null, ' ',
      failed ? h('span', { class: 'badge bad' }, failed + ' failed') : h('span', { class: 'badge ok' }, es.some((e) => e.simulated) ? 'passed in simulation' : 'passed'));
    const list = h('ol', { class: 'evidence' }, es.map((e, j) => evidenceRow(e, run + '/' + j)));
    if (i === 0) return h('section', { class: 'run', 'data-run': run, 'aria-label': 'Qualification run ' + run }, h('h3', {}, head), list);
    return h('details', { class: 'run', 'data-run': run, 'data-key': 'run/' + run }, h('summary', {}, head), list);
  });
}

function evidenceRow(e, key) {
  const cmd = e.command.join(' ');
  const lines = (s) => (s ? s.replace(/\n$/, '').split('\n').length : 0);
  const out = [];
  if (e.stdout) out.push(h('p', { class: 'out-label' }, 'stdout'), h('pre', { class: 'evidence-out stdout', tabindex: '0', 'aria-label': 'stdout of ' + cmd }, e.stdout));
  if (e.stderr) out.push(h('p', { class: 'out-label' }, 'stderr'), h('pre', { class: 'evidence-out stderr', tabindex: '0', 'aria-label': 'stderr of ' + cmd }, e.stderr));
  if (e.error) out.push(h('p', { class: 'out-label' }, 'error'), h('pre', { class: 'evidence-out error-out' }, e.error));
  // Evidence of simulated devices says so wherever its result shows (as
  // the CLI's and the report's do): it is not a qualification.
  const resultCls = e.simulated ? 'warn' : e.result === 'Pass' ? 'ok' : e.result === 'Fail' ? 'bad' : 'warn';
  return h('li', { class: 'evidence-row', 'data-command': cmd, 'data-result': e.result, 'data-simulated': e.simulated ? 'true' : 'false' },
    h('div', { class: 'ev-head' },
      h('ol', { class: 'argv', 'aria-label': 'Command arguments' }, e.command.map((a) => h('li', {}, h('code', {}, a)))),
      h('span', { class: 'badge result ' + resultCls }, e.simulated ? e.result + ' (Simulated)' : e.result),
      h('span', { class: 'muted small' }, e.exitCode === null || e.exitCode === undefined ? 'no exit code' : 'exit ' + e.exitCode),
      h('span', { class: 'muted small' }, e.durationMs < 1000 ? e.durationMs + ' ms' : duration(e.durationMs / 1000)),
      e.gpus && e.gpus.length ? h('span', { class: 'muted small' }, 'GPUs ' + e.gpus.join(', ')) : null),
    e.message ? h('p', { class: 'ev-message' }, e.message) : null,
    out.length
      ? h('details', { class: 'output', 'data-key': key },
        h('summary', {}, 'Raw output', h('span', { class: 'muted small' }, ' (' + [e.stdout ? lines(e.stdout) + ' lines of stdout' : null, e.stderr ? lines(e.stderr) + ' of stderr' : null, e.error ? 'an error' : null].filter(Boolean).join(', ') + ')')),
        out)
      : h('p', { class: 'muted small' }, 'It printed nothing.'));
}

// drainConfirm asks before a drain, which stops running work, with an
// optional grace period.
function drainConfirm(name, onYes) {
  const d = h('dialog', { id: 'confirm-drain', 'aria-labelledby': 'drain-h' });
  const grace = h('input', { type: 'text', id: 'drain-grace', name: 'grace', placeholder: 'e.g. 5m', autocomplete: 'off' });
  const no = h('button', { type: 'button', id: 'drain-no', onclick: () => d.close() }, 'Keep its work running');
  const yes = h('button', { type: 'button', class: 'danger', id: 'drain-yes', onclick: () => { d.close(); onYes(grace.value.trim()); } }, 'Drain ' + name);
  d.append(h('h2', { id: 'drain-h' }, 'Drain ' + name + '?'),
    h('p', {}, 'Its running workloads get SIGTERM, then SIGKILL after the grace period, and are requeued; the node then stays cordoned until uncordoned.'),
    h('div', { class: 'field' }, h('label', { for: 'drain-grace' }, 'Grace period'), grace,
      h('p', { class: 'help' }, 'Empty: each workload\'s own. At most 24h.')),
    h('div', { class: 'actions' }, no, yes));
  d.addEventListener('toggle', () => {
    if (d.open) no.focus();
  });
  d.addEventListener('close', () => {
    const b = document.getElementById('node-drain') || document.querySelector('#node-actions button');
    if (b) b.focus();
  });
  return d;
}
