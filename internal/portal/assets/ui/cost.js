// Cost figures shared by the Cost page and the dashboard: money as the API
// writes it (a JSON number in currency units, exact to the micro-unit),
// budgets' bars, and the banner that speaks when a budget is alerting or
// exceeded.

import { api } from './api.js';
import { h, bar, pct, every, duration } from './dom.js';

// IDLE is the name of the report's row of what the pools billed that no
// workload held (admins only).
export const IDLE = '__idle__';

// How amounts are shown: the rule of internal/cost/display.go (Amount,
// PerUnit, GPUHours), mirrored here; a browser test holds the two to the
// same answers. The API writes money as a JSON number with at most six
// decimals, taken to integer micro-units first.

// MINOR are the currencies whose minor units are not 2 (cost.MinorUnits).
const MINOR = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
};

function minorUnits(currency) {
  return currency in MINOR ? MINOR[currency] : 2;
}

// digits writes the non-negative integer n with d decimals.
function digits(n, d) {
  let s = String(n);
  if (d === 0) return s;
  if (s.length <= d) s = '0'.repeat(d - s.length + 1) + s;
  return s.slice(0, s.length - d) + '.' + s.slice(s.length - d);
}

// decimals writes micro-units u rounded half away from zero to d decimals.
function decimals(u, d) {
  const step = 10 ** (6 - d);
  const q = Math.floor((Math.abs(u) + step / 2) / step);
  return (u < 0 && q !== 0 ? '-' : '') + digits(q, d);
}

function micro(v) {
  return Math.round(v * 1e6);
}

// amount writes an amount in the currency's minor units: "0.63".
export function amount(v, currency) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  return decimals(micro(v), minorUnits(currency));
}

// perUnit writes a per-unit figure (a cost per output, a rate): the minor
// units, or, where they would read 0 for an amount that is not, down to
// its first significant digit: "0.07", "0.00007".
export function perUnit(v, currency) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  const u = micro(v);
  let d = minorUnits(currency);
  const step = (k) => 10 ** (6 - k);
  if (u !== 0 && Math.floor((Math.abs(u) + step(d) / 2) / step(d)) === 0) {
    for (d++; d < 6 && Math.floor(Math.abs(u) / step(d)) === 0; d++);
  }
  return decimals(u, d);
}

// money is amount with its currency code: "0.63 USD".
export function money(v, currency) {
  return withCurrency(amount(v, currency), currency);
}

// moneyPer is perUnit with its currency code: "0.00007 USD".
export function moneyPer(v, currency) {
  return withCurrency(perUnit(v, currency), currency);
}

function withCurrency(s, currency) {
  return s === '—' || !currency ? s : s + ' ' + currency;
}

// hours writes GPU-hours: two decimals from one up, three significant
// digits below one.
export function hours(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a === 0) return '0.00';
  let d = 2;
  while (d < 15 && a * 10 ** d < 100) d++;
  let n = Math.round(a * 10 ** d);
  if (d > 2 && n >= 1000) {
    d--;
    n = Math.round(a * 10 ** d);
  }
  return (v < 0 ? '-' : '') + digits(n, d);
}

// share writes a share of a request as a percentage with at most one
// decimal; a share too small for that is "<0.1%", never "0%".
export function share(v) {
  if (v > 0 && v < 0.0005) return '<0.1%';
  return Math.round(v * 1000) / 10 + '%';
}

// bytes writes a size in the largest binary unit that keeps one decimal:
// "203.7 MiB".
export function bytes(v) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return String(Math.round(v * 10) / 10) + ' ' + units[i];
}

// cpuSeconds writes a number of CPU-seconds as the CLI does: one decimal,
// two below 10, and "<0.01" for less, never 0.
function cpuSeconds(v) {
  if (v > 0 && v < 0.005) return '<0.01';
  return v.toFixed(v < 10 ? 2 : 1);
}

// efficiency writes what a row's attempts used of the CPU and memory they
// requested (api.Efficiency): "CPU 16.2% of request · memory 39.8% of
// request", or what they used where they requested none ("1.5 CPU-s ·
// peak 4.8 MiB"), with the figures behind it as its title; "—" where
// nothing was measured, never 0%.
export function efficiency(e) {
  if (!e) return { text: '—', title: 'not measured' };
  const known = (v) => v !== null && v !== undefined;
  const parts = [];
  const title = [];
  if (known(e.cpuSeconds)) {
    const used = cpuSeconds(e.cpuSeconds) + ' CPU-s';
    parts.push(known(e.cpuEfficiency) ? 'CPU ' + share(e.cpuEfficiency) + ' of request' : used);
    title.push(used + ' used' + (known(e.requestedCPUSeconds) ? ' of ' + cpuSeconds(e.requestedCPUSeconds) + ' CPU-s requested' : ' (no CPU request)'));
  }
  if (known(e.peakMemoryBytes)) {
    const peak = 'peak ' + bytes(e.peakMemoryBytes);
    parts.push(known(e.memoryEfficiency) ? 'memory ' + share(e.memoryEfficiency) + ' of request' : peak);
    title.push(peak + (known(e.memoryEfficiency) ? ', ' + share(e.memoryEfficiency) + ' of the memory request' : ' (no memory request)'));
  }
  title.push(e.measuredAttempts + ' attempt' + (e.measuredAttempts === 1 ? '' : 's') + ' measured');
  return { text: parts.join(' · ') || '—', title: title.join('; ') };
}

// alertAt is the spend at which a budget alerts (alertPercent, 80 when
// the budget leaves it to the default).
export function alertAt(b) {
  return (b.monthly * (b.alertPercent || 80)) / 100;
}

// projected is what the team will have spent when the month resets at its
// current burn rate.
function projected(b, now) {
  const left = Math.max(0, (Date.parse(b.resetsAt) - now) / 3600e3);
  return b.spent + (b.burnPerHour || 0) * left;
}

// budgetBar draws one team's month: spent against the monthly budget, a
// mark at the alert level and a dashed one at what the month will have
// cost at the current burn rate; amber once alerting, red when exceeded,
// with the forecast below.
export function budgetBar(b, now = Date.now()) {
  const cur = b.currency;
  const state = b.exceeded ? 'exceeded' : b.alerting ? 'alerting' : 'ok';
  // The class is prefixed: a bare "ok" is the style of a success message.
  const proj = projected(b, now);
  return h('div', { class: 'budget-bar budget-' + state, 'data-team': b.team, 'data-state': state },
    h('div', { class: 'team-bar-head' },
      h('strong', {}, b.team),
      h('span', {},
        `${money(b.spent, cur)} of ${money(b.monthly, cur)} (${pct(b.spentRatio || 0)})`,
        h('span', { class: 'badge ' + (b.hard ? 'info' : ''), title: b.hard ? 'new non-production workloads wait once it is reached' : 'alerts only; nothing waits' }, b.hard ? 'hard' : 'soft'),
        b.exceeded ? h('span', { class: 'badge bad' }, 'exceeded') : b.alerting ? h('span', { class: 'badge warn' }, 'alerting') : null)),
    bar(b.spent, b.monthly, {
      label: `${b.team}: spent ${money(b.spent, cur)} of ${money(b.monthly, cur)} this month (${pct(b.spentRatio || 0)}), alert at ${b.alertPercent || 80}%` +
        (b.exceeded ? ', exceeded' : b.alerting ? ', alerting' : ''),
      cls: b.exceeded ? 'over' : b.alerting ? 'alert' : 'within',
      markers: [
        { at: alertAt(b), label: `alert at ${b.alertPercent || 80}% (${money(alertAt(b), cur)})`, class: 'alert' },
        { at: proj, label: `${money(proj, cur)} by the month's end at the current burn rate`, class: 'forecast' },
      ],
    }),
    h('div', { class: 'team-bar-foot' },
      `burns ${money(b.burnPerHour || 0, cur)} per hour now · `,
      b.exhaustedSince
        ? h('span', { class: 'forecast-text' }, 'spent since ', when(b.exhaustedSince, now))
        : b.exhaustedAt
          ? h('span', { class: 'forecast-text' }, 'runs out at ', when(b.exhaustedAt, now))
          : h('span', { class: 'forecast-text' }, 'does not run out this month at this rate'),
      ' · resets at ', when(b.resetsAt, now),
      b.exceeded && b.hard ? h('div', { class: 'warn-text' }, 'New non-production workloads of ' + b.team + ' wait (BudgetExceeded) until the month resets' +
        (b.stopRunning ? '; its running work is stopped too, lowest classes first.' : '; running work continues.')) : null));
}

// when is a <time> to the second (UTC), with how far from now it is.
function when(t, now) {
  const sec = (Date.parse(t) - now) / 1000;
  const rel = Math.abs(sec) < 5 ? 'now' : sec > 0 ? 'in ' + duration(sec) : duration(-sec) + ' ago';
  return h('time', { datetime: t, title: t }, t.replace(/\.\d+(Z|[+-]\d\d:\d\d)$/, '$1') + ' (' + rel + ')');
}

// budgetNotices lists the budgets that are alerting or exceeded, the exceeded
// first; null when none is.
export function budgetNotices(items) {
  const hot = (items || []).filter((b) => b.alerting || b.exceeded)
    .sort((a, b) => (b.exceeded - a.exceeded) || a.team.localeCompare(b.team));
  if (!hot.length) return null;
  return h('div', { class: 'budget-banner' + (hot.some((b) => b.exceeded) ? ' exceeded' : ''), role: 'status' },
    h('strong', {}, hot.length === 1 ? 'A budget needs attention: ' : hot.length + ' budgets need attention: '),
    h('ul', {}, hot.map((b) => h('li', { 'data-team': b.team },
      b.exceeded
        ? `${b.team} has reached its ${b.hard ? 'hard ' : ''}budget: ${money(b.spent, b.currency)} of ${money(b.monthly, b.currency)} this month` +
          (b.exhaustedSince ? ', since ' + b.exhaustedSince.replace(/\.\d+Z$/, 'Z') : '') +
          (b.hard ? '; its new non-production workloads wait until the month resets.' : '.')
        : `${b.team} has spent ${money(b.spent, b.currency)} of ${money(b.monthly, b.currency)} (${pct(b.spentRatio || 0)}), over its alert level of ${b.alertPercent || 80}%` +
          (b.exhaustedAt ? '; at this rate it runs out at ' + b.exhaustedAt.replace(/\.\d+Z$/, 'Z') + '.' : '.')))),
    h('a', { href: '#/cost' }, 'Cost and budgets'));
}

// watchBudgets keeps el showing budgetNotices, reading GET /budgets every
// ms milliseconds (10 s: the server evaluates budgets as often); a server
// without budgets, or one that refuses, shows nothing. It returns a function that stops it. The banner is replaced
// only when what it says changes, so that it is announced once.
export function watchBudgets(el, ms = 10000) {
  const ac = new AbortController();
  let said = '';
  const stop = every(ms, async () => {
    let items = [];
    try {
      items = ((await api('/budgets', { signal: ac.signal })) || {}).items || [];
    } catch (e) {
      if (e.name === 'AbortError') return;
    }
    const n = budgetNotices(items);
    const text = n ? n.textContent : '';
    if (text === said) return;
    said = text;
    el.replaceChildren(...(n ? [n] : []));
  });
  return () => {
    stop();
    ac.abort();
  };
}
