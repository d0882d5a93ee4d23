import { api } from '../api.js';
import { h, replace, gpus, bar, errorBox, table, every } from '../dom.js';

// quotaScale is the one scale of every team's bar, in milli-GPU, so that
// bars can be compared: the cluster's GPUs, or more when a team's
// guarantee, limit, usage or fair share is larger (pending demand, which
// may ask for more than the cluster, is said in words).
export function quotaScale(teams, clusterMilli) {
  let top = Math.max(clusterMilli || 0, 1000);
  for (const t of teams) {
    const limit = t.limitMilliGPU !== undefined && t.limitMilliGPU >= 0 ? t.limitMilliGPU : 0;
    top = Math.max(top, t.guaranteedMilliGPU, t.fairShareMilliGPU, t.usageMilliGPU, limit);
  }
  return top;
}

// scaleNote says what the bars' scale is; with axis, as an axis under
// full-width bars (0 at the left, the scale at the right).
export function scaleNote(scale, clusterMilli, axis) {
  const what = clusterMilli && scale === Math.max(clusterMilli, 1000) ? ' (the cluster\'s GPUs)' : '';
  const text = `Every bar on one scale: 0 to ${gpus(scale)} GPUs${what}.`;
  if (!axis) return h('p', { class: 'help', id: 'quota-scale' }, text);
  return h('div', { class: 'bar-scale', id: 'quota-scale' },
    h('span', { 'aria-hidden': 'true' }, '0'), h('span', {}, text), h('span', { 'aria-hidden': 'true' }, gpus(scale) + ' GPUs'));
}

// clusterMilli is the GPUs of the nodes, in milli-GPU.
export function clusterMilli(nodes) {
  return (nodes || []).reduce((s, n) => s + (n.gpus || []).length, 0) * 1000;
}

// teamBar is a team's use against its guarantee, fair share and limit,
// drawn on scale (quotaScale: the same for every team).
export function teamBar(t, scale) {
  const limit = t.limitMilliGPU !== undefined && t.limitMilliGPU >= 0 ? t.limitMilliGPU : null;
  scale = scale || quotaScale([t], 0);
  const over = t.usageMilliGPU > t.guaranteedMilliGPU;
  return h('div', { class: 'team-bar', 'data-team': t.name },
    h('div', { class: 'team-bar-head' },
      h('strong', {}, t.name),
      h('span', {}, `${gpus(t.usageMilliGPU)} GPU${t.usageMilliGPU === 1000 ? '' : 's'} in use`, over ? h('span', { class: 'badge info', title: 'using more than its guarantee: the excess may be reclaimed' }, 'borrowing') : null)),
    bar(t.usageMilliGPU, scale, {
      label: `${t.name}: ${gpus(t.usageMilliGPU)} GPUs in use, guarantee ${gpus(t.guaranteedMilliGPU)}, fair share ${gpus(t.fairShareMilliGPU)}` +
        (limit !== null ? `, limit ${gpus(limit)}` : '') + `, on a scale of ${gpus(scale)} GPUs`,
      cls: over ? 'borrow' : 'within',
      markers: [
        { at: t.guaranteedMilliGPU, label: 'guarantee ' + gpus(t.guaranteedMilliGPU), class: 'guarantee' },
        { at: t.fairShareMilliGPU, label: 'fair share ' + gpus(t.fairShareMilliGPU), class: 'fairshare' },
      ].concat(limit !== null ? [{ at: limit, label: 'limit ' + gpus(limit), class: 'limit' }] : []),
    }),
    h('div', { class: 'team-bar-foot' },
      `guarantee ${gpus(t.guaranteedMilliGPU)} · fair share ${gpus(t.fairShareMilliGPU)} · pending demand ${gpus(t.pendingMilliGPU)}` +
      (limit !== null ? ` · limit ${gpus(limit)}` : '')));
}

export function render(main) {
  const box = h('div', { id: 'teams' }, h('p', { class: 'muted' }, 'Loading…'));
  const errBox = h('div', {});
  replace(main,
    h('h1', {}, 'Teams'),
    h('p', { class: 'help' },
      'Guarantee: what a team always gets back (by reclaiming borrowed GPUs) when it has work waiting. ',
      'Fair share: its part of the whole cluster by weight, from the last scheduling cycle. ',
      'Usage and pending demand are GPUs its running and pending workloads hold and ask for. Figures in GPUs (0.25 is a quarter of one).'),
    h('p', { class: 'help' }, 'In the bars: blue is use within the guarantee, purple use beyond it (borrowed, and reclaimable); the solid mark is the guarantee, the dashed one the fair share, the red one the limit. ',
      'Every bar has the same scale (the cluster\'s GPUs, or the largest figure when one is larger), so that teams can be compared.'),
    errBox, box);
  const ac = new AbortController();
  const stop = every(5000, async () => {
    try {
      const [tr, nr] = await Promise.allSettled([api('/teams', { signal: ac.signal }), api('/nodes', { signal: ac.signal })]);
      if (tr.status === 'rejected') throw tr.reason;
      const ts = tr.value.items;
      const cluster = nr.status === 'fulfilled' ? clusterMilli(nr.value.items) : 0;
      const scale = quotaScale(ts, cluster);
      replace(errBox);
      replace(box, ts.length ? scaleNote(scale, cluster) : null,
        table('Teams', ['Team', 'Use against guarantee and fair share', 'Guarantee', 'Limit', 'Weight', 'Usage', 'Fair share', 'Pending demand', 'Priority classes'],
          ts.map((t) => ({
            attrs: { 'data-team': t.name },
            cells: [
              h('a', { href: '#/workloads?team=' + encodeURIComponent(t.name) + '&phase=' }, t.name),
              teamBar(t, scale),
              gpus(t.guaranteedMilliGPU),
              t.limitMilliGPU === undefined || t.limitMilliGPU < 0 ? 'unlimited' : gpus(t.limitMilliGPU),
              String(t.weight || 1),
              gpus(t.usageMilliGPU),
              gpus(t.fairShareMilliGPU),
              gpus(t.pendingMilliGPU),
              (t.priorityClasses && t.priorityClasses.length) ? t.priorityClasses.join(', ') : 'every preemptible class',
            ],
          })), { empty: 'You belong to no team.', cls: 'teams' }));
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot read the teams'));
    }
  });
  return () => {
    stop();
    ac.abort();
  };
}
