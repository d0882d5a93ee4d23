import { api } from '../api.js';
import { h, replace, gpus, bar, errorBox, table, every } from '../dom.js';

// teamBar is a team's use against its guarantee and fair share.
export function teamBar(t) {
  const limit = t.limitMilliGPU !== undefined && t.limitMilliGPU >= 0 ? t.limitMilliGPU : null;
  const scale = Math.max(t.guaranteedMilliGPU, t.fairShareMilliGPU, t.usageMilliGPU + t.pendingMilliGPU, 1000);
  const over = t.usageMilliGPU > t.guaranteedMilliGPU;
  return h('div', { class: 'team-bar', 'data-team': t.name },
    h('div', { class: 'team-bar-head' },
      h('strong', {}, t.name),
      h('span', {}, `${gpus(t.usageMilliGPU)} GPU${t.usageMilliGPU === 1000 ? '' : 's'} in use`, over ? h('span', { class: 'badge info', title: 'using more than its guarantee: the excess may be reclaimed' }, 'borrowing') : null)),
    bar(t.usageMilliGPU, scale, {
      label: `${t.name}: ${gpus(t.usageMilliGPU)} GPUs in use, guarantee ${gpus(t.guaranteedMilliGPU)}, fair share ${gpus(t.fairShareMilliGPU)}`,
      cls: over ? 'borrow' : 'within',
      markers: [
        { at: t.guaranteedMilliGPU, label: 'guarantee ' + gpus(t.guaranteedMilliGPU), class: 'guarantee' },
        { at: t.fairShareMilliGPU, label: 'fair share ' + gpus(t.fairShareMilliGPU), class: 'fairshare' },
      ],
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
    h('p', { class: 'help' }, 'In the bars: blue is use within the guarantee, purple use beyond it (borrowed, and reclaimable); the solid mark is the guarantee, the dashed one the fair share.'),
    errBox, box);
  const ac = new AbortController();
  const stop = every(5000, async () => {
    try {
      const ts = (await api('/teams', { signal: ac.signal })).items;
      replace(errBox);
      replace(box,
        table('Teams', ['Team', 'Use against guarantee and fair share', 'Guarantee', 'Limit', 'Weight', 'Usage', 'Fair share', 'Pending demand', 'Priority classes'],
          ts.map((t) => ({
            attrs: { 'data-team': t.name },
            cells: [
              h('a', { href: '#/workloads?team=' + encodeURIComponent(t.name) + '&phase=' }, t.name),
              teamBar(t),
              gpus(t.guaranteedMilliGPU),
              t.limitMilliGPU === undefined || t.limitMilliGPU < 0 ? 'none' : gpus(t.limitMilliGPU),
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
