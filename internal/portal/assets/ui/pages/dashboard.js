import { api, list } from '../api.js';
import { h, replace, gpus, pct, duration, since, bar, errorBox, table, every, askGPUs, placement, workloadLink, clipped } from '../dom.js';
import { timeChart } from '../chart.js';
import { teamBar, quotaScale, scaleNote, clusterMilli } from './teams.js';
import { watchBudgets } from '../cost.js'; // budget banner (issue 15)

const WINDOWS = [['5m', 5], ['15m', 15], ['1h', 60], ['6h', 360], ['24h', 1440]];

// samples are taken by this page from /nodes and /workloads when the
// server has no usage history (GET /api/v1/usage answers 404): the chart
// then covers the time since the portal was opened.
const samples = [];
let windowName = '1h';

export function render(main, _route, _ctx) {
  const stats = h('div', { class: 'tiles', id: 'stats' }, h('p', { class: 'muted' }, 'Loading…'));
  const chartBox = h('div', { id: 'usage-chart' });
  const chartNote = h('p', { class: 'help', id: 'usage-note' });
  const teamsBox = h('div', { id: 'team-bars' });
  const runningBox = h('div', { id: 'running' });
  const pendingBox = h('div', { id: 'pending' });
  const errBox = h('div', {});
  const budgetAlerts = h('div', { id: 'budget-alerts' }); // budget banner (issue 15)
  const updated = h('p', { class: 'help updated', 'aria-live': 'polite' });
  const win = h('select', { id: 'window', name: 'window' },
    WINDOWS.map(([n]) => h('option', { value: n, selected: n === windowName }, 'last ' + n)));
  win.addEventListener('change', () => {
    windowName = win.value;
    refresh();
  });

  replace(main,
    h('div', { class: 'page-head' }, h('h1', { id: 'dashboard' }, 'Dashboard'), updated),
    errBox,
    budgetAlerts,
    stats,
    h('div', { class: 'dash-grid' },
      h('section', { class: 'card', 'aria-labelledby': 'usage-h' },
        h('div', { class: 'section-head' },
          h('h2', { id: 'usage-h' }, 'GPUs allocated and actually used'),
          h('span', { class: 'inline' }, h('label', { for: 'window' }, 'Window '), win)),
        chartBox, chartNote),
      h('section', { class: 'card', 'aria-labelledby': 'teams-h' },
        h('h2', { id: 'teams-h' }, 'Team quotas'),
        h('p', { class: 'help' }, 'GPUs each team holds, against its guarantee (solid mark), fair share (dashed mark) and limit (red mark); purple when borrowing beyond the guarantee. All bars share one scale. ',
          h('a', { href: '#/teams' }, 'All figures')),
        teamsBox),
      h('section', { class: 'card', 'aria-labelledby': 'running-h' },
        h('h2', { id: 'running-h' }, 'Running workloads'),
        runningBox),
      h('section', { class: 'card', 'aria-labelledby': 'queue-h' },
        h('h2', { id: 'queue-h' }, 'Queue'),
        pendingBox)));

  const ac = new AbortController();
  async function refresh() {
    const { signal } = ac;
    const windowMin = WINDOWS.find(([n]) => n === windowName)[1];
    const [usage, nodes, teams, active] = await Promise.allSettled([
      api('/usage?window=' + windowName, { signal }),
      api('/nodes', { signal }),
      api('/teams', { signal }),
      list('/workloads?phase=Pending,Running&limit=1000', { signal, max: 5000 }),
    ]);
    if (signal.aborted) return;
    const errors = [];
    for (const [what, r] of [['nodes', nodes], ['teams', teams], ['workloads', active]]) {
      if (r.status === 'rejected') errors.push(errorBox(r.reason, 'Cannot read ' + what));
    }
    if (usage.status === 'rejected' && usage.reason.status !== 404) errors.push(errorBox(usage.reason, 'Cannot read the usage history'));
    replace(errBox, errors);

    const now = Date.now();
    const ns = nodes.status === 'fulfilled' ? nodes.value.items : null;
    const ws = active.status === 'fulfilled' ? active.value.items : null;
    const cur = current(ns, ws, now);
    if (ns && ws) {
      samples.push(Object.assign({ t: now }, cur));
      while (samples.length && samples[0].t < now - 24 * 3600e3) samples.shift();
    }

    // The chart: the server's history when it keeps one, else ours.
    let points;
    let interval = 0;
    if (usage.status === 'fulfilled' && usage.value && Array.isArray(usage.value.points)) {
      points = usage.value.points.map((p) => Object.assign({}, p, { t: Date.parse(p.time) }));
      interval = usage.value.intervalSeconds || 0;
      chartNote.textContent = `From the server's usage history, one point every ${interval || '?'} s. ` +
        'Allocated counts GPU shares (fractions included); used is the sum of the sampled utilisation of every GPU.';
    } else {
      points = samples;
      chartNote.textContent = 'This server keeps no usage history (GET /api/v1/usage is not available), so the chart shows what this page ' +
        'has sampled since it was opened. Used appears once the server reports GPU utilisation.';
    }
    const total = cur ? cur.gpus : Math.max(0, ...points.map((p) => p.gpus || 0));
    // A history shorter than the window (a server started a few minutes
    // ago) fills the chart rather than a sliver at its right.
    let span = windowMin * 60e3;
    const first = points.find((p) => p.t >= now - span);
    if (first) span = Math.min(span, Math.max(60e3, now - first.t));
    replace(chartBox, timeChart({
      points, now, windowMs: span, yMax: total,
      title: span < windowMin * 60e3 ? `GPUs allocated and used since ${new Date(first.t).toISOString()}` : `GPUs allocated and used, last ${windowName}`,
      series: [
        { key: 'gpus', label: 'GPUs in the cluster', cls: 's-total', dashed: true },
        { key: 'allocatedGPUs', label: 'Allocated', cls: 's-alloc', area: true },
        { key: 'usedGPUs', label: 'Actually used', cls: 's-used' },
      ],
    }));
    const lastPoint = points.length ? points[points.length - 1] : null;
    renderStats(stats, cur, lastPoint, ws);
    if (span < windowMin * 60e3) chartNote.append(' The history covers less than the window, so the chart shows all of it.');

    if (teams.status === 'fulfilled') {
      const ts = teams.value.items;
      const cluster = clusterMilli(ns);
      const scale = quotaScale(ts, cluster);
      replace(teamsBox, ts.length ? [h('ul', { class: 'team-bars' }, ts.map((t) => h('li', {}, teamBar(t, scale)))), scaleNote(scale, cluster, true)] :
        h('p', { class: 'muted' }, 'You belong to no team.'));
    }
    if (ws) {
      const pending = ws.filter((w) => w.status.phase === 'Pending');
      const running = ws.filter((w) => w.status.phase === 'Running');
      replace(pendingBox, queue(pending, now));
      replace(runningBox, table('Running workloads',
        ['Workload', 'Team', 'Owner', 'GPUs', 'Placement', 'Running for', 'GPU use'],
        running.map((w) => ({
          attrs: { 'data-id': w.id },
          cells: [
            workloadLink(w),
            w.team, w.owner, askGPUs(w), h('span', { class: 'place' }, placement(w)), since(w.status.startedAt), usageCell(w),
          ],
        })), { empty: 'Nothing is running.', cls: 'running' }));
    }
    const iso = new Date(now).toISOString();
    updated.replaceChildren('Updated ', h('time', { datetime: iso, title: iso }, iso.replace(/\.\d+Z$/, 'Z')),
      ' · refreshes every 5 s');
  }
  const stop = every(5000, refresh);
  const stopBudgets = watchBudgets(budgetAlerts); // budget banner (issue 15)
  return () => {
    stop();
    stopBudgets();
    ac.abort();
  };
}

// current computes the cluster's figures now from the nodes and the active
// workloads.
function current(nodes, ws, now) {
  if (!nodes) return null;
  let total = 0;
  let alloc = 0;
  let idle = 0;
  let used = 0;
  let sampled = false;
  for (const n of nodes) {
    for (const g of n.gpus || []) {
      total++;
      alloc += g.allocatedMilliGPU / 1000;
      if (!g.allocatedMilliGPU) idle++;
      if (typeof g.utilization === 'number') {
        used += g.utilization;
        sampled = true;
      }
    }
  }
  const out = { gpus: total, allocatedGPUs: alloc, idleGPUs: idle };
  if (sampled) out.usedGPUs = used;
  if (ws) {
    const pending = ws.filter((w) => w.status.phase === 'Pending');
    out.pending = pending.length;
    out.running = ws.length - pending.length;
    out.queueWaitSeconds = pending.length ? pending.reduce((s, w) => s + (now - Date.parse(w.createdAt)) / 1000, 0) / pending.length : 0;
  }
  return out;
}

function tile(label, value, note, id) {
  return h('div', { class: 'tile', id }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value), note ? h('div', { class: 'tile-note' }, note) : null);
}

function renderStats(el, cur, last, ws) {
  if (!cur) return;
  const used = typeof cur.usedGPUs === 'number' ? cur.usedGPUs : last && typeof last.usedGPUs === 'number' ? last.usedGPUs : null;
  const idleWorkloads = ws ? ws.filter((w) => w.status.usage && w.status.usage.idleSince).length : 0;
  const wait = last && typeof last.queueWaitSeconds === 'number' ? last.queueWaitSeconds : cur.queueWaitSeconds;
  replace(el,
    tile('GPUs', String(cur.gpus), 'in the cluster', 'tile-gpus'),
    tile('Allocated', gpus(cur.allocatedGPUs * 1000), cur.gpus ? pct(cur.allocatedGPUs / cur.gpus) + ' of the GPUs' : '', 'tile-alloc'),
    tile('Actually used', used === null ? 'not sampled' : String(Math.round(used * 100) / 100),
      used === null ? 'no utilisation reported yet' : cur.allocatedGPUs ? pct(used / Math.max(cur.allocatedGPUs, 1e-9)) + ' of what is allocated' : '', 'tile-used'),
    tile('Idle GPUs', String(cur.idleGPUs), 'nothing allocated' + (idleWorkloads ? ` · ${idleWorkloads} workload${idleWorkloads > 1 ? 's' : ''} idle` : ''), 'tile-idle'),
    tile('Running', String(cur.running ?? '—'), 'workloads', 'tile-running'),
    tile('Queue', String(cur.pending ?? '—'), cur.pending ? 'pending, mean wait ' + duration(wait) : 'nothing waiting', 'tile-queue'));
}

function queue(pending, now) {
  if (!pending.length) return h('p', { class: 'muted empty' }, 'No workload is waiting.');
  pending.sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
  const longest = (now - Date.parse(pending[0].createdAt)) / 1000;
  return [
    h('p', {}, `${pending.length} pending; the longest has waited ${duration(longest)}.`),
    table('Pending workloads', ['Workload', 'Team', 'GPUs', 'Waiting', 'Why'],
      pending.slice(0, 8).map((w) => [
        workloadLink(w),
        w.team, askGPUs(w), since(w.createdAt), clipped([w.status.reason, w.status.message].filter(Boolean).join(': ')),
      ]), { cls: 'queue' }),
    pending.length > 8 ? h('p', {}, h('a', { href: '#/workloads?phase=Pending' }, `All ${pending.length} pending workloads`)) : null,
  ];
}

function usageCell(w) {
  const u = w.status && w.status.usage;
  if (!u) return h('span', { class: 'muted' }, 'not sampled');
  return h('span', { class: 'usage' }, bar(u.gpuUtilization, 1, { label: 'utilisation ' + pct(u.gpuUtilization), cls: 'util' }), ' ', pct(u.gpuUtilization),
    u.idleSince ? h('span', { class: 'badge warn', title: 'below the idle threshold since ' + u.idleSince }, 'idle') : null);
}
