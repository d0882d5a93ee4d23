// Cost figures shared by the Cost page and the dashboard: money as the API
// writes it (a JSON number in currency units, exact to the micro-unit),
// budgets' bars, and the banner that speaks when a budget is alerting or
// exceeded.

import { api } from './api.js';
import { h, bar, pct, every, duration } from './dom.js';

// IDLE is the name of the report's row of what the pools billed that no
// workload held (admins only).
export const IDLE = '__idle__';

// money formats an amount with its currency code: two decimals ("USD
// 1,234.50"), or every decimal the amount has, up to six, when it is below
// 0.01 ("USD 0.000278"). The amount is taken to the micro-unit first, so
// the rounding to cents (half up) is exact.
export function money(v, currency) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  let micro = Math.round(v * 1e6);
  const sign = micro < 0 ? '-' : '';
  micro = Math.abs(micro);
  let s;
  if (micro !== 0 && micro < 10000) {
    s = '0.' + String(micro).padStart(6, '0').replace(/0+$/, '');
  } else {
    const cents = Math.floor((micro + 5000) / 10000);
    s = group(Math.floor(cents / 100)) + '.' + String(cents % 100).padStart(2, '0');
  }
  return (currency ? currency + ' ' : '') + sign + s;
}

function group(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// hours formats GPU-hours: 2 decimals, or 2 significant digits below 0.01.
export function hours(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
  if (v === 0) return '0';
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 0.01) return v.toFixed(2);
  return String(Number(v.toPrecision(2)));
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
  const exhausted = b.exhaustedAt ? Date.parse(b.exhaustedAt) : null;
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
      exhausted !== null
        ? h('span', { class: 'forecast-text' }, exhausted <= now ? 'ran out at ' : 'runs out at ', when(b.exhaustedAt, now))
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
