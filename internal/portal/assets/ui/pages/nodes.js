import { api } from '../api.js';
import { h, replace, gpus, mib, pct, bar, ago, errorBox, table, every } from '../dom.js';
import { stateBadge, healthBadge } from './node.js'; // issue 16: state and health

export function render(main) {
  const box = h('div', { id: 'nodes' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  replace(main,
    h('h1', {}, 'Nodes'),
    h('p', { class: 'help' }, 'Each GPU with what is allocated on it (workloads of your teams are named), its sampled utilisation and memory, and its health. ',
      'Refreshes every 5 s.'),
    errBox, box);
  const ac = new AbortController();
  const stop = every(5000, async () => {
    try {
      const ns = (await api('/nodes', { signal: ac.signal })).items;
      replace(errBox);
      replace(box, ns.length ? [summary(ns), ns.map(node)] : h('p', { class: 'muted' }, 'No node is registered.'));
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the nodes'));
    }
  });
  return () => {
    stop();
    ac.abort();
  };
}

function node(n) {
  const total = n.gpus.length;
  const alloc = n.gpus.reduce((s, g) => s + g.allocatedMilliGPU, 0);
  const meta = [n.pool && 'pool ' + n.pool, n.region && 'region ' + n.region, n.cpu ? n.cpu + ' CPUs' : null,
    n.memoryMiB ? mib(n.memoryMiB) + ' memory' : null].filter(Boolean).join(' · ');
  return h('section', { class: 'card node', 'data-node': n.name, 'aria-labelledby': 'node-' + n.name },
    h('div', { class: 'section-head' },
      // issue 16: the name opens the node's page; the badge is its state.
      h('h2', { id: 'node-' + n.name }, h('a', { href: nodeHref(n.name) }, n.name), ' ', n.state ? stateBadge(n)
        : n.schedulable ? h('span', { class: 'badge ok' }, 'schedulable') : h('span', { class: 'badge warn' }, 'cordoned')),
      h('span', { class: 'help' }, `${gpus(alloc)} of ${total} GPUs allocated`, meta ? ' · ' + meta : '', n.updatedAt ? h('span', {}, ' · last reported ', ago(n.updatedAt)) : null)),
    table('GPUs of ' + n.name, ['GPU', 'Model', 'Allocated', 'Allocations', 'Utilisation', 'Memory', 'Health'],
      n.gpus.map((g) => ({ attrs: { 'data-gpu': String(g.index) }, cells: gpuRow(g) })), { empty: 'This node has no GPU.', cls: 'gpus' }));
}

function gpuRow(g) {
  const allocs = g.allocations || [];
  const named = allocs.reduce((s, a) => s + a.milliGPU, 0);
  return [
    h('span', {}, String(g.index), h('br'), h('code', { class: 'small muted', title: g.uuid }, g.uuid.length > 16 ? g.uuid.slice(0, 16) + '…' : g.uuid)),
    h('span', {}, g.model, g.simulated ? h('span', { class: 'badge info', title: 'a simulated GPU: no device behind it' }, 'simulated') : null,
      g.domain ? h('span', { class: 'small muted' }, ' NVLink domain ' + g.domain) : null),
    h('span', { class: 'cell-bar' }, bar(g.allocatedMilliGPU, 1000, { label: gpus(g.allocatedMilliGPU) + ' of this GPU allocated', cls: 'alloc' }),
      ' ', gpus(g.allocatedMilliGPU)),
    allocs.length || g.allocatedMilliGPU ? h('ul', { class: 'plain allocs' },
      allocs.map((a) => h('li', {}, h('a', { href: '#/workloads/' + encodeURIComponent(a.workloadID) }, a.workloadID), ` ${a.team}, ${gpus(a.milliGPU)} GPU, ${mib(a.memoryMiB)}`)),
      g.allocatedMilliGPU > named ? h('li', { class: 'muted' }, `${gpus(g.allocatedMilliGPU - named)} GPU held by other teams`) : null) : h('span', { class: 'muted' }, 'free'),
    typeof g.utilization === 'number'
      ? h('span', { class: 'cell-bar' }, bar(g.utilization, 1, { label: 'utilisation ' + pct(g.utilization), cls: 'util' }), ' ', pct(g.utilization))
      : h('span', { class: 'muted' }, 'not sampled'),
    h('span', {}, typeof g.memoryUsedMiB === 'number' ? `${mib(g.memoryUsedMiB)} used · ` : '', `${mib(g.allocatedMemoryMiB)} allocated of ${mib(g.memoryMiB)}`),
    // issue 16: the GPU's lifecycle health, with its reason, when the
    // server has a node lifecycle.
    g.health ? h('span', {}, healthBadge(g), g.healthReason ? h('span', { class: 'small health-reason' }, ' ' + g.healthReason) : null)
      : g.healthy === true ? h('span', { class: 'badge ok' }, 'healthy')
      : g.healthy === false ? h('span', { class: 'badge bad', title: 'the last sample reported an error, or the node is cordoned' }, 'unhealthy')
        : h('span', { class: 'muted', title: 'this server does not report GPU health' }, 'unknown'),
  ];
}

// --- issue 16: the nodes at a glance, with STATE and HEALTH columns, each
// name linked to the node's page.
function nodeHref(name) {
  return '#/nodes/' + encodeURIComponent(name);
}

function summary(ns) {
  return h('section', { class: 'card', 'aria-labelledby': 'nodes-summary-h' },
    h('h2', { id: 'nodes-summary-h' }, 'At a glance'),
    table('Nodes with their state and GPU health', ['Node', 'State', 'Health', 'GPUs allocated', 'Why'],
      ns.map((n) => ({ attrs: { 'data-node-row': n.name }, cells: [
        h('a', { href: nodeHref(n.name), class: 'node-link' }, n.name),
        n.state ? h('span', { class: 'state' }, stateBadge(n)) : h('span', { class: 'muted' }, '—'),
        h('span', { class: 'health' }, healthCounts(n.gpus)),
        `${gpus(n.gpus.reduce((s, g) => s + g.allocatedMilliGPU, 0))} of ${n.gpus.length}`,
        h('span', { class: 'clip', title: [n.stateReason, n.stateMessage].filter(Boolean).join(': ') || null },
          [n.stateReason, n.stateMessage].filter(Boolean).join(': ') || ''),
      ] })), { cls: 'node-summary' }));
}

// healthCounts says how many GPUs are of each health: "4 Healthy",
// "3 Healthy, 1 Failed".
function healthCounts(gs) {
  if (!gs.length) return h('span', { class: 'muted' }, 'no GPU');
  const counts = new Map();
  for (const g of gs) counts.set(g.health || 'Unknown', (counts.get(g.health || 'Unknown') || 0) + 1);
  const order = ['Failed', 'Suspect', 'Healthy', 'Unknown'];
  return [...counts.entries()].sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]))
    .map(([k, v], i) => [i ? ', ' : '', h('span', { 'data-health': k, class: k === 'Failed' ? 'bad-text' : k === 'Suspect' ? 'warn-text' : null }, v + ' ' + k)]);
}
// --- end of issue 16
