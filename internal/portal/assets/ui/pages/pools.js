import { api } from '../api.js';
import { h, replace, pct, errorBox, table, every } from '../dom.js';
import { moneyPer } from '../cost.js';

// The Pools page (issue 19): the clusters (GET /api/v1/clusters) and the
// pools (GET /api/v1/pools) with the words of `gpufleet get clusters` and
// `gpufleet get pools`: each pool's cluster, region/zone, kind, GPUs, what
// running work holds of them (ALLOCATED, fractions included), their
// sampled use (USED), the price in effect and its health (Healthy,
// Degraded, Unavailable), with an SVG bar of allocated against total
// GPUs. Each pool's price says its currency. Refreshes every 5 s.

const REFRESH_MS = 5000;

// HEALTH_CLASS is the badge class of each pool health.
const HEALTH_CLASS = { Healthy: 'ok', Degraded: 'warn', Unavailable: 'bad' };

export function render(main) {
  const clustersBox = h('div', { id: 'clusters' }, h('p', { class: 'muted' }, 'Loading…'));
  const poolsBox = h('div', { id: 'pools' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  replace(main,
    h('h1', {}, 'Pools'),
    h('p', { class: 'help' }, 'The clusters work runs in, and their pools: each pool\'s GPUs, what running work holds of them ',
      '(allocated), their sampled use, the price in effect and its health, as ', h('code', {}, 'gpufleet get clusters'), ' and ',
      h('code', {}, 'gpufleet get pools'), ' show them. Refreshes every 5 s.'),
    errBox,
    h('section', { class: 'card', 'aria-labelledby': 'clusters-h' }, h('h2', { id: 'clusters-h' }, 'Clusters'), clustersBox),
    h('section', { class: 'card', 'aria-labelledby': 'pools-h' }, h('h2', { id: 'pools-h' }, 'Pools'), poolsBox));
  const ac = new AbortController();
  const stop = every(REFRESH_MS, async () => {
    try {
      const signal = ac.signal;
      const [cs, ps] = await Promise.all([api('/clusters', { signal }), api('/pools', { signal })]);
      replace(errBox);
      replace(clustersBox, clustersTable(cs.items || []));
      replace(poolsBox, poolsTable(ps.items || []));
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the clusters and pools'));
    }
  });
  return () => {
    stop();
    ac.abort();
  };
}

function clustersTable(cs) {
  // reachable: whether the server reaches the cluster now (absent: it
  // does not say), as get clusters' REACHABLE column.
  const reach = (r) => r === true ? 'yes' : r === false ? 'no' : '—';
  return table('Clusters', ['Name', 'Executor', 'Reachable', 'Nodes', 'Ready', 'GPUs', 'Pools'],
    cs.map((c) => ({ attrs: { 'data-cluster': c.name }, cells: [
      h('span', { class: 'name' }, c.name),
      h('span', { class: 'executor' }, c.executor),
      h('span', { class: c.reachable === false ? 'reachable bad-text' : 'reachable' }, reach(c.reachable)),
      h('span', { class: 'nodes' }, String(c.nodes)),
      h('span', { class: 'ready' }, String(c.readyNodes)),
      h('span', { class: 'gpus' }, String(c.gpus)),
      (c.pools || []).length ? h('span', { class: 'pools' }, c.pools.join(', ')) : h('span', { class: 'muted' }, '—'),
    ] })), { empty: 'No cluster.', cls: 'clusters' });
}

function poolsTable(ps) {
  return table('Pools', ['Name', 'Cluster', 'Region/zone', 'Kind', 'GPUs', 'Allocated', 'Used', 'Price', 'Health'],
    ps.map((p) => ({ attrs: { 'data-pool': p.name }, cells: [
      h('span', { class: 'name' }, p.name),
      p.cluster ? h('span', { class: 'cluster' }, p.cluster) : h('span', { class: 'muted' }, '—'),
      regionZone(p),
      h('span', { class: 'kind' }, p.kind),
      h('span', { class: 'gpus', title: `${p.readyNodes} of ${p.nodes} nodes take work` }, String(p.gpus)),
      h('span', { class: 'cell-bar' }, allocBar(p), ' ', h('span', { class: 'allocated' }, num(p.allocatedGPUs))),
      h('span', { class: 'used', title: 'the sum of its GPUs\' sampled utilisation' }, (p.usedGPUs || 0).toFixed(2)),
      price(p.price, p.currency),
      healthBadge(p.health),
    ] })), { empty: 'No pool.', cls: 'pools' });
}

function regionZone(p) {
  const s = [p.region, p.zone].filter(Boolean).join('/');
  return s ? h('span', { class: 'region' }, s) : h('span', { class: 'muted' }, '—');
}

// num writes a GPU count as the API does: up to three decimals.
function num(v) {
  return String(Math.round((v || 0) * 1000) / 1000);
}

// allocBar is an SVG bar of the pool's allocated GPUs (filled) against its
// total (the track), saying both in its title.
function allocBar(p) {
  const W = 100;
  const H = 10;
  const frac = p.gpus > 0 ? Math.min(1, Math.max(0, (p.allocatedGPUs || 0) / p.gpus)) : 0;
  const label = `${num(p.allocatedGPUs)} of ${p.gpus} GPUs allocated (${pct(frac)})`;
  return h('svg:svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'pool-bar', role: 'img', 'aria-label': label, 'data-fraction': frac.toFixed(4) },
    h('svg:title', {}, label),
    h('svg:rect', { class: 'track', x: 0, y: 0, width: W, height: H, rx: 2 }),
    h('svg:rect', { class: 'fill', x: 0, y: 0, width: (frac * W).toFixed(2), height: H, rx: 2 }));
}

// price says the price in effect per GPU-hour as the server bills it
// (gpuHourRate: a monthly rate over 730 h, an owned GPU's purchase over its
// depreciation), then its kind and, when it is set per something else, the
// price as set with what it is per.
function price(pr, currency) {
  if (!pr) return h('span', { class: 'muted price', title: 'no price is set for this pool' }, '—');
  let asSet = '';
  switch (pr.kind) {
    case 'reserved':
      asSet = `${pr.gpus} GPUs for ${pr.term}`;
      break;
    case 'monthly':
      asSet = `${moneyPer(pr.rate || 0, currency)}/GPU-month`;
      break;
    case 'owned':
      asSet = [pr.purchase ? `${moneyPer(pr.purchase, currency)}/GPU over ${pr.depreciation}` : '',
        pr.perGPUHour ? `${moneyPer(pr.perGPUHour, currency)}/GPU-hour to run` : ''].filter(Boolean).join(' + ');
      break;
  }
  return h('span', { class: 'price', 'data-kind': pr.kind },
    `${moneyPer(pr.gpuHourRate || 0, currency)}/GPU-hour`, ' ', h('span', { class: 'muted small' }, pr.kind + (asSet ? ', ' + asSet : '')));
}

function healthBadge(s) {
  return h('span', { class: ('badge health ' + (HEALTH_CLASS[s] || '')).trim(), 'data-health': s || '' }, s || 'unknown');
}
