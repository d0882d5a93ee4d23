import { api } from '../api.js';
import { h, replace, pct, errorBox, table, every, wid } from '../dom.js';
import { stackedBars } from '../barchart.js';
import { IDLE, money, moneyPer, hours, budgetBar, budgetNotices, efficiency } from '../cost.js';

// The windows the page offers: name (the URL's since=), label, length and
// the step of the chart's bars.
const WINDOWS = [
  ['24h', 'Last 24 hours', 24 * 3600e3, '1h', 3600e3],
  ['7d', 'Last 7 days', 7 * 24 * 3600e3, '6h', 6 * 3600e3],
  ['30d', 'Last 30 days', 30 * 24 * 3600e3, '24h', 24 * 3600e3],
];

// What the table of cost per accepted output groups by (the URL's by=;
// a label is by=label:KEY).
const GROUPS = [['workload', 'Workload'], ['team', 'Team'], ['user', 'User'], ['pool', 'Pool'], ['label', 'Label']];

// Colours of the chart's teams: a class each, in the order of their names,
// so a team keeps its colour from one refresh to the next.
const PALETTE = 8;

// TABLE_ROWS bounds the table (the costliest first); the CLI reads them all.
const TABLE_ROWS = 50;

const NO_PRICES = 'gpufleet set price local --on-demand 2.5';

// The Cost page (#/cost?since=24h&by=workload): what completed work cost,
// from GET /api/v1/cost, /cost/series and /budgets with the user's token,
// so a member sees its teams only and the idle row is for admins. The
// window and the grouping go into the URL.
export function render(main, { query }, ctx) {
  const f = {
    since: WINDOWS.some(([n]) => n === query.get('since')) ? query.get('since') : '24h',
    by: query.get('by') || 'workload',
  };
  let group = f.by.startsWith('label:') ? 'label' : f.by;
  if (!GROUPS.some(([g]) => g === group)) group = 'workload';
  const since = h('select', { id: 'c-since', name: 'since' }, WINDOWS.map(([n, l]) => h('option', { value: n, selected: n === f.since }, l)));
  const by = h('select', { id: 'c-by', name: 'by' }, GROUPS.map(([g, l]) => h('option', { value: g, selected: g === group }, l)));
  const labelKey = h('input', { id: 'c-label', name: 'label', type: 'text', value: group === 'label' ? f.by.slice(6) : '', placeholder: 'label key', autocomplete: 'off', 'aria-describedby': 'c-label-error' });
  const labelField = h('div', { class: 'field' }, h('label', { for: 'c-label' }, 'Label key'), labelKey, h('p', { class: 'field-error', id: 'c-label-error' }));
  labelField.hidden = group !== 'label';
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Choose the window and the grouping' },
    h('div', { class: 'field' }, h('label', { for: 'c-since' }, 'Window'), since),
    h('div', { class: 'field' }, h('label', { for: 'c-by' }, 'Cost per output by'), by),
    labelField,
    h('div', { class: 'field' }, h('button', { type: 'submit' }, 'Apply')));

  const alerts = h('div', { id: 'budget-alerts' });
  const errBox = h('div', {});
  const tiles = h('div', { class: 'tiles', id: 'cost-tiles' }, h('p', { class: 'muted' }, 'Loading…'));
  const chartBox = h('div', { id: 'cost-chart' });
  const chartNote = h('p', { class: 'help', id: 'cost-chart-note' });
  const budgetsBox = h('div', { id: 'budgets' }, h('p', { class: 'muted' }, 'Loading…'));
  const tableHead = h('h2', { id: 'cost-table-h' }, 'Cost per accepted output');
  const tableBox = h('div', { id: 'cost-table' }, h('p', { class: 'muted' }, 'Loading…'));
  const updated = h('p', { class: 'help updated', 'aria-live': 'polite' });

  replace(main,
    h('div', { class: 'page-head' }, h('h1', { id: 'cost' }, 'Cost'), updated),
    h('p', { class: 'help' }, 'What your teams\' work cost: GPU time billed once (a shared GPU split by each workload\'s share), plus host, storage, network and licence lines, ',
      'under the pools\' prices. Idle, failed and preempted hours explain the cost; they are already inside it. The CLI\'s ',
      h('code', {}, 'gpufleet cost report'), ' reads the same.'),
    alerts, form, errBox, tiles,
    h('div', { class: 'dash-grid' },
      h('section', { class: 'card', 'aria-labelledby': 'cost-chart-h' },
        h('h2', { id: 'cost-chart-h' }, 'Cost by team over time'),
        chartBox, chartNote),
      h('section', { class: 'card', 'aria-labelledby': 'budgets-h' },
        h('h2', { id: 'budgets-h' }, 'Budgets this month'),
        h('p', { class: 'help' }, 'Spent this calendar month (UTC) against each team\'s budget: the solid mark is the alert level, the dashed one what the month will cost at the current burn rate. Amber once alerting, red when exceeded.'),
        budgetsBox)),
    h('section', { class: 'card', 'aria-labelledby': 'cost-table-h' }, tableHead, tableBox));

  const ac = new AbortController();
  async function refresh() {
    const { signal } = ac;
    const [, , span, stepName, stepMs] = WINDOWS.find(([n]) => n === f.since);
    const now = Date.now();
    const from = Math.floor((now - span) / stepMs) * stepMs;
    // To the next whole second: the window holds all of what ended just
    // now (to the second, the API's times, it would stop before it).
    const q = `from=${iso(from)}&to=${iso(Math.ceil(now / 1000) * 1000)}`;
    const byTeam = '/cost?by=team&' + q;
    const [series, teams, rows, budgets, prices] = await Promise.allSettled([
      api('/cost/series?by=team&step=' + stepName + '&' + q, { signal }),
      api(byTeam, { signal }),
      f.by === 'team' ? null : api('/cost?by=' + encodeURIComponent(f.by) + '&' + q, { signal }),
      api('/budgets', { signal }),
      api('/prices', { signal }),
    ]);
    if (signal.aborted) return;
    const errors = [];
    for (const [what, r] of [['the cost by team', teams], ['the cost over time', series], ['the cost per output', rows], ['the budgets', budgets]]) {
      if (r.status === 'rejected' && r.reason.name !== 'AbortError') {
        errors.push(r.reason.status === 404 && what !== 'the budgets'
          ? h('div', { class: 'error', role: 'alert' }, 'This server does not report cost (GET /api/v1/cost answered 404): it predates cost reports.')
          : errorBox(r.reason, 'Cannot read ' + what));
      }
    }
    replace(errBox, errors.filter((e, i) => errors.findIndex((x) => x.textContent === e.textContent) === i));

    // No price at all: nothing can be billed. (A caller who may not read
    // the prices is told nothing about them.)
    const noPrices = prices.status === 'fulfilled' && prices.value && !(prices.value.items || []).length;
    const report = teams.status === 'fulfilled' ? teams.value : null;
    const cur = report ? report.currency : (series.status === 'fulfilled' ? series.value.currency : '');
    const nothing = report && !(report.total.totalCost > 0) && !(report.total.gpuHours > 0);
    const emptyText = noPrices
      ? h('p', { class: 'muted empty', id: 'no-prices' }, 'No prices are set, so nothing is billed. An admin sets one per pool, per GPU-hour: ', h('code', {}, NO_PRICES), '.')
      : nothing ? h('p', { class: 'muted empty' }, 'Nothing was billed in this window: run work on a priced pool, or choose a longer window.') : null;

    // What could not be read says so above; its place stays empty.
    const unread = h('p', { class: 'muted empty' }, 'No figures: see the error above.');
    if (report) renderTiles(tiles, report, ctx, budgets.status === 'fulfilled' ? budgets.value.items || [] : null);
    else replace(tiles);
    if (series.status === 'fulfilled') renderChart(chartBox, chartNote, series.value, report, stepMs, emptyText && emptyText.cloneNode(true));
    else replace(chartBox, unread.cloneNode(true));
    if (budgets.status === 'rejected') replace(budgetsBox, unread.cloneNode(true));
    if (budgets.status === 'fulfilled') {
      const bs = (budgets.value.items || []).slice().sort((a, b) => a.team.localeCompare(b.team));
      replace(budgetsBox, bs.length ? h('ul', { class: 'team-bars budget-bars' }, bs.map((b) => h('li', {}, budgetBar(b, now))))
        : h('p', { class: 'muted empty' }, 'No budget is set for your teams. An admin sets one per team and calendar month: ',
          h('code', {}, 'gpufleet set budget TEAM --monthly 5000 --alert 80%'), ' (add ', h('code', {}, '--hard'), ' to make new work wait once it is spent).'));
      const n = budgetNotices(bs);
      if ((n ? n.textContent : '') !== alerts.textContent) replace(alerts, n);
    }
    const tableReport = f.by === 'team' ? teams : rows;
    if (tableReport.status === 'fulfilled' && tableReport.value) {
      tableHead.textContent = 'Cost per accepted output, by ' + (f.by.startsWith('label:') ? 'label ' + f.by.slice(6) : f.by);
      renderTable(tableBox, tableReport.value, f.by, emptyText);
    } else if (tableReport.status === 'rejected') {
      replace(tableBox, unread.cloneNode(true));
    }
    const t = iso(now);
    updated.replaceChildren('Updated ', h('time', { datetime: t, title: t }, t), ' · refreshes every 15 s');
  }

  const apply = () => {
    const g = by.value;
    let next = g;
    if (g === 'label') {
      const key = labelKey.value.trim();
      labelField.hidden = false;
      if (!key) {
        labelKey.setAttribute('aria-invalid', 'true');
        document.getElementById('c-label-error').textContent = 'Name the label whose values group the table (the key of --label KEY=VALUE).';
        return;
      }
      next = 'label:' + key;
    }
    labelKey.removeAttribute('aria-invalid');
    document.getElementById('c-label-error').textContent = '';
    labelField.hidden = g !== 'label';
    f.since = since.value;
    f.by = next;
    history.replaceState(null, '', '#/cost?' + new URLSearchParams({ since: f.since, by: f.by }).toString());
    refresh();
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    apply();
  });
  since.addEventListener('change', apply);
  by.addEventListener('change', () => {
    if (by.value === 'label' && !labelKey.value.trim()) {
      // Ask for the key first; Apply (or Enter) then groups by it.
      labelField.hidden = false;
      labelKey.focus();
      return;
    }
    apply();
  });
  const stop = every(15000, refresh);
  return () => {
    stop();
    ac.abort();
  };
}

function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

function tile(label, value, note, id) {
  return h('div', { class: 'tile', id }, h('div', { class: 'tile-label' }, label), h('div', { class: 'tile-value' }, value), note ? h('div', { class: 'tile-note' }, note) : null);
}

// renderTiles: the window's total, the GPU-hours billed, the idle share
// (for a caller who sees the idle row: admins), the cost per accepted
// output of each unit, the hours of failed and preempted work, and the
// budgets.
function renderTiles(el, report, ctx, budgets) {
  const cur = report.currency;
  const tot = report.total;
  const idle = report.items.find((r) => r.name === IDLE);
  const units = (tot.outputsByUnit || []).filter((u) => u.accepted > 0);
  const showIdle = idle || (ctx.me && ctx.me.admin);
  const idleCost = idle ? idle.totalCost : 0;
  replace(el,
    tile('Cost', money(tot.totalCost, cur), 'in the window', 'tile-cost'),
    tile('GPU-hours', hours(tot.gpuHours), 'billed, each counted once', 'tile-gpu-hours'),
    showIdle ? tile('Idle cost share', tot.totalCost > 0 ? pct(idleCost / tot.totalCost) : '—',
      tot.totalCost > 0 ? `${money(idleCost, cur)} billed for GPUs nobody held` : 'nothing billed', 'tile-idle') : null,
    tile('Per accepted output', units.length ? units.map((u) => `${moneyPer(u.costPerAccepted, cur)} / ${singular(u.unit)}`).join(' · ') : '—',
      units.length ? units.map((u) => `${u.accepted} ${u.unit} accepted, ${u.rejected} rejected`).join('; ') : 'no output accepted yet', 'tile-per-output'),
    tile('Failed and preempted', hours(tot.failedGPUHours + tot.preemptedGPUHours) + ' GPU-h', `${tot.retries} retr${tot.retries === 1 ? 'y' : 'ies'}`, 'tile-lost'),
    budgets ? tile('Budgets', String(budgets.length),
      budgets.length ? `${budgets.filter((b) => b.exceeded).length} exceeded, ${budgets.filter((b) => b.alerting && !b.exceeded).length} alerting` : 'none set', 'tile-budgets') : null);
}

// renderChart stacks each team's cost per step, the idle row (admins) on
// top, teams in the order of their names so that colours stay put.
function renderChart(box, note, s, report, stepMs, emptyText) {
  const totals = {};
  for (const p of s.points || []) for (const [k, v] of Object.entries(p.items || {})) totals[k] = (totals[k] || 0) + v;
  const keys = Object.keys(totals).filter((k) => k !== IDLE).sort();
  if (IDLE in totals) keys.push(IDLE);
  const series = keys.map((k, i) => ({
    key: k, label: k === IDLE ? 'Idle (billed, held by nobody)' : k, cls: k === IDLE ? 'st-idle' : 'st-' + (i % PALETTE), total: totals[k],
  }));
  const from = Date.parse(s.from);
  const to = Date.parse(s.to);
  const step = parseStep(s.step) || stepMs;
  const cur = s.currency;
  const per = step === 3600e3 ? 'hour' : step === 24 * 3600e3 ? 'day' : (step / 3600e3) + ' hours';
  replace(box, stackedBars({
    id: 'cost-bars',
    title: `Cost by team per ${per}, ${s.from} to ${s.to}`,
    points: (s.points || []).map((p) => ({ t: Date.parse(p.start), values: p.items || {} })),
    series, from, to, stepMs: step,
    format: (v) => money(v, cur),
    empty: 'Nothing billed in this window.',
  }), series.some((x) => x.total > 0) ? null : emptyText);
  note.textContent = `${cur} per ${per}, each bar the cost of the work held in that ${per} (times in UTC); hover a bar for its figures.` +
    (report && report.items.some((r) => r.name === IDLE) ? ' Grey is what the pools billed for GPUs nobody held (reserved, monthly and owned GPUs bill whether used or not).' : '');
}

// parseStep reads a Go duration of whole hours, minutes or seconds ("1h",
// "6h0m0s", "30m") as milliseconds.
function parseStep(d) {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(d || '');
  if (!m || !d) return 0;
  return ((+m[1] || 0) * 3600 + (+m[2] || 0) * 60 + (+m[3] || 0)) * 1000;
}

// renderTable: each row's cost and what it bought, one line per unit of
// its outputs, the costliest first, the idle row and the total last.
function renderTable(box, report, by, emptyText) {
  const cur = report.currency;
  const rows = report.items.filter((r) => r.name !== IDLE).sort((a, b) => b.totalCost - a.totalCost || a.name.localeCompare(b.name));
  const idle = report.items.find((r) => r.name === IDLE);
  const what = by === 'workload' ? 'Workload' : by.startsWith('label:') ? by.slice(6) : by[0].toUpperCase() + by.slice(1);
  if (!rows.length && !idle) {
    replace(box, emptyText || h('p', { class: 'muted empty' }, by.startsWith('label:')
      ? ['No workload of yours ran in this window with the label ', h('code', {}, by.slice(6)), '. Label workloads when submitting them: ', h('code', {}, 'gpufleet submit --label ' + by.slice(6) + '=VALUE …'), '.']
      : 'Nothing of yours ran in this window: choose a longer window.'));
    return;
  }
  // lines is one element per unit of a row's outputs.
  const lines = (r, cls, f) => h('span', { class: cls }, (r.outputsByUnit || []).map((u) => h('span', { class: 'unit-line', 'data-unit': u.unit }, f(u))));
  const cell = (r) => {
    const name = r.name === IDLE ? h('span', { class: 'muted' }, 'Idle (billed, held by nobody)')
      : by === 'workload' ? h('span', {}, h('a', { href: '#/workloads/' + encodeURIComponent(r.name) }, r.workloadName || wid(r.name)),
        r.workloadName ? h('span', { class: 'muted small' }, ' ', wid(r.name)) : null,
        r.acceptanceStage ? h('span', { class: 'badge info', title: 'a stage of acceptance run ' + r.acceptanceStage + ': its outputs are the card\'s, not the team\'s' }, 'acceptance stage') : null)
        : by === 'team' ? h('a', { href: '#/workloads?team=' + encodeURIComponent(r.name) + '&phase=' }, r.name)
          : r.name || h('span', { class: 'muted' }, by.startsWith('label:') ? '(without ' + by.slice(6) + ')' : '(none)');
    const parts = [['accelerator', r.acceleratorCost], ['host', r.hostCost], ['storage', r.storageCost], ['network', r.networkCost], ['licences', r.licenceCost]];
    const none = r.name === IDLE || !(r.outputsByUnit || []).length;
    const used = efficiency(r.efficiency);
    return {
      attrs: { 'data-name': r.name || '', class: r.name === IDLE ? 'idle' : '' },
      cells: [
        r.efficiency ? h('span', {}, name, h('span', { class: 'use-line muted small used', title: used.title }, 'Used: ' + used.text)) : name,
        h('span', { class: 'num' }, hours(r.gpuHours)),
        h('span', { class: 'num cost', title: parts.map(([k, v]) => `${k} ${money(v, cur)}`).join(' · ') }, money(r.totalCost, cur)),
        none ? h('span', { class: 'num accepted' }, r.name === IDLE ? '' : '0') : lines(r, 'num accepted', (u) => `${u.accepted} ${u.unit}`),
        none ? h('span', { class: 'num rejected' }, r.name === IDLE ? '' : '0') : lines(r, 'num rejected', (u) => String(u.rejected)),
        none ? h('span', { class: 'muted per-output' }, r.name === IDLE ? '' : 'no accepted output')
          : lines(r, 'num per-output', (u) => u.costPerAccepted === null || u.costPerAccepted === undefined ? '—' : `${moneyPer(u.costPerAccepted, cur)} / ${singular(u.unit)}`),
        none ? h('span', { class: 'num not-counted' }, '')
          : lines(r, 'num not-counted', (u) => [u.unaccepted ? `${u.unaccepted} of failed work` : '', u.acceptance ? `${u.acceptance} of acceptance stages` : ''].filter(Boolean).join(', ')),
        h('span', { class: 'num' }, hours(r.failedGPUHours)),
        h('span', { class: 'num' }, hours(r.preemptedGPUHours)),
        h('span', { class: 'num' }, r.name === IDLE ? '' : String(r.retries)),
      ],
    };
  };
  const shown = rows.slice(0, TABLE_ROWS).map(cell);
  if (idle) shown.push(cell(idle));
  const total = cell(Object.assign({}, report.total, { name: '' }));
  total.attrs = { 'data-total': '', class: 'total' };
  total.cells[0] = h('strong', {}, 'Total');
  shown.push(total);
  replace(box,
    table('Cost per accepted output by ' + what.toLowerCase(), [what, 'GPU-hours', 'Cost', 'Accepted', 'Rejected', 'Per accepted output', 'Not counted', 'Failed GPU-h', 'Preempted GPU-h', 'Retries'],
      shown, { cls: 'cost' }),
    rows.length > TABLE_ROWS ? h('p', { class: 'help' }, `The ${TABLE_ROWS} costliest of ${rows.length}; `, h('code', {}, 'gpufleet cost report --by ' + by), ' lists them all.') : null,
    h('p', { class: 'help' }, 'Per accepted output is the cost over the outputs the workloads reported accepted in the window ($GPUFLEET_OUTPUTS_FILE or the API, counted from the moment they are reported; one per succeeded job that reports none), one line per unit. Outputs of work that failed, and of acceptance stages, are shown but not counted. Hover a cost for its parts. Used, under a row\'s name where the executor measured it: the share of their CPU request × runtime the attempts used, and of their memory request their peak (weighted by runtime); hover for the figures. The host cost bills the requests.'));
}

// singular turns a unit of outputs into one of them: "images" → "image".
function singular(u) {
  return /[^s]s$/.test(u) ? u.slice(0, -1) : u;
}
