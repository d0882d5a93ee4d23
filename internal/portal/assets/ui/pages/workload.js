import { api, streamLogs, LOG_TAIL_BYTES, token } from '../api.js';
import { h, replace, ago, rfc3339, phase, errorBox, table, dl, every, gpus, mib, pct, duration, askGPUs } from '../dom.js';
import { timeChart } from '../chart.js';

const TERMINAL = ['Succeeded', 'Failed', 'Cancelled'];
const USAGE_WINDOWS = [['15m', 15], ['1h', 60], ['4h', 240]];
let usageWindow = '1h';

export function render(main, { parts }) {
  const id = parts[1];
  const title = h('h1', {}, id);
  const phaseBox = h('span', { id: 'phase' });
  const actions = h('div', { class: 'actions' });
  const openBox = h('span', { class: 'actions', id: 'open' }); // Open links (openLinks)
  const why = h('section', { class: 'card why', id: 'why', 'aria-labelledby': 'why-h' });
  const statusBox = h('div', { id: 'status' });
  const specBox = h('div', { id: 'spec' });
  const placeBox = h('div', { id: 'placement' });
  const eventsBox = h('div', { id: 'events' });
  const errBox = h('div', {});
  const logs = h('pre', { id: 'logs', class: 'logs', tabindex: '0', 'aria-label': 'Log output', 'aria-live': 'off' });
  const logState = h('p', { class: 'help', id: 'log-state', 'aria-live': 'polite' }, 'Connecting…');
  const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const usageBox = h('div', { id: 'usage-charts', class: 'cols' });
  const usageNote = h('p', { class: 'help', id: 'usage-note', 'aria-live': 'polite' });
  const usageWin = h('select', { id: 'usage-window', name: 'window' },
    USAGE_WINDOWS.map(([n]) => h('option', { value: n, selected: n === usageWindow }, 'last ' + n)));
  usageWin.addEventListener('change', () => {
    usageWindow = usageWin.value;
    if (w) refreshUsage(w);
  });
  const dialog = confirmDialog(id, () => cancel());

  replace(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/workloads' }, 'Workloads'), ' / ', id),
    h('div', { class: 'page-head' }, h('div', { class: 'title-row' }, title, phaseBox), h('div', { class: 'actions' }, openBox, actions)),
    errBox,
    why,
    h('div', { class: 'cols' },
      h('section', { class: 'card', 'aria-labelledby': 'status-h' }, h('h2', { id: 'status-h' }, 'Status'), statusBox),
      h('section', { class: 'card', 'aria-labelledby': 'spec-h' }, h('h2', { id: 'spec-h' }, 'Spec'), specBox)),
    h('section', { class: 'card', id: 'usage-card', 'aria-labelledby': 'gpu-use-h' },
      h('div', { class: 'section-head' }, h('h2', { id: 'gpu-use-h' }, 'GPU use over time'),
        h('span', { class: 'inline' }, h('label', { for: 'usage-window' }, 'Window '), usageWin)),
      usageBox, usageNote),
    h('section', { class: 'card', 'aria-labelledby': 'logs-h' },
      h('div', { class: 'section-head' }, h('h2', { id: 'logs-h' }, 'Logs'), logState,
        h('span', { class: 'check' }, follow, h('label', { for: 'log-follow' }, 'Scroll to the end as lines arrive'))),
      logs),
    h('section', { class: 'card', 'aria-labelledby': 'placement-h' }, h('h2', { id: 'placement-h' }, 'Placement'), placeBox),
    h('section', { class: 'card', 'aria-labelledby': 'events-h' }, h('h2', { id: 'events-h' }, 'Events'), eventsBox),
    dialog);

  const ac = new AbortController();
  let w = null;

  async function refresh() {
    try {
      const [wl, evs] = await Promise.all([
        api('/workloads/' + encodeURIComponent(id), { signal: ac.signal }),
        api('/workloads/' + encodeURIComponent(id) + '/events', { signal: ac.signal }),
      ]);
      w = wl;
      replace(errBox);
      show(wl, evs.items);
      await refreshUsage(wl);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404 && !w) {
        // Nothing to show: say so, and stop following its log.
        ac.abort();
        replace(main, h('p', { class: 'crumbs' }, h('a', { href: '#/workloads' }, 'Workloads'), ' / ', id),
          h('h1', {}, id),
          errorBox(e, 'No such workload, or not one of your teams\''),
          h('p', {}, h('a', { href: '#/workloads' }, 'Back to the workloads')));
        return;
      }
      replace(errBox, errorBox(e, 'Cannot read the workload'));
    }
  }

  function show(wl, evs) {
    const st = wl.status;
    title.textContent = wl.name || wl.id;
    document.title = (wl.name || wl.id) + ' · gpufleet';
    replace(phaseBox, phase(st.phase), st.stopRequested && !TERMINAL.includes(st.phase) ? h('span', { class: 'badge warn' }, 'stopping: ' + st.stopRequested) : null);
    const done = TERMINAL.includes(st.phase);
    if (done || st.stopRequested) replace(actions);
    else if (!actions.firstChild) {
      replace(actions, h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: () => dialog.showModal() }, 'Cancel workload'));
    }
    const openKey = st.phase === 'Running' ? JSON.stringify(wl.ports || []) : '';
    if (openBox.dataset.key !== openKey) { // redrawn only when it changes: a focused link keeps its focus
      openBox.dataset.key = openKey;
      replace(openBox, openKey ? openLinks(wl) : null);
    }
    replace(why, h('h2', { id: 'why-h' }, whyTitle(st)), whyText(wl));
    if (st.phase === 'Pending' && !got) logState.textContent = 'No output yet: the log follows here once the workload starts.';
    replace(statusBox, dl([
      ['Phase', st.phase],
      ['Reason', st.reason || null],
      ['Message', st.message || null],
      ['Exit code', st.exitCode === null || st.exitCode === undefined ? null : String(st.exitCode)],
      ['Attempts', String(st.attempts)],
      ['Preemptions', st.preemptions ? String(st.preemptions) : null],
      ['Stop requested', st.stopRequested || null],
      ['Preempted by', st.preemptedBy ? h('a', { href: '#/workloads/' + encodeURIComponent(st.preemptedBy) }, st.preemptedBy) : null],
      ['Nominated node', st.nominatedNode || null],
      ['Submitted', rfc3339(wl.createdAt)],
      ['Started', st.startedAt ? rfc3339(st.startedAt) : null],
      ['Finished', st.finishedAt ? rfc3339(st.finishedAt) : null],
      ['Ran for', st.startedAt ? duration(((st.finishedAt ? Date.parse(st.finishedAt) : Date.now()) - Date.parse(st.startedAt)) / 1000) : null],
      ['GPU use', st.usage ? usageText(st.usage) : (st.phase === 'Running' ? h('span', { class: 'muted' }, 'not sampled') : null)],
    ]));
    replace(specBox, dl([
      ['ID', wl.id],
      ['Team', wl.team],
      ['Owner', wl.owner],
      ['Kind', wl.kind],
      ['Priority', wl.priority],
      ['GPUs', askGPUs(wl)],
      ['GPU models', (wl.resources.gpuModels || []).join(', ') || null],
      ['CPU', wl.resources.cpu ? String(wl.resources.cpu) : null],
      ['Memory', wl.resources.memoryMiB ? mib(wl.resources.memoryMiB) : null],
      ['Image', wl.image || null],
      ['Ports', (wl.ports || []).map((p) => (p.name ? p.name + '=' : '') + p.port).join(', ') || null],
      ['Command', wl.command && wl.command.length ? argvView(wl.command) : null],
      ['Working directory', wl.workingDir || null],
      ['Environment', wl.env && Object.keys(wl.env).length ? h('ul', { class: 'plain' }, Object.entries(wl.env).map(([k, v]) => h('li', {}, h('code', {}, k + '=' + v)))) : null],
      ['Max runtime', wl.maxRuntimeSeconds ? duration(wl.maxRuntimeSeconds) : null],
      ['Grace period', wl.gracePeriodSeconds ? duration(wl.gracePeriodSeconds) : null],
      ['Labels', pairs(wl.labels)],
      ['Node selector', pairs(wl.nodeSelector)],
    ]));
    replace(placeBox, table('Placement', ['Replica', 'Node', 'GPU', 'GPU UUID', 'Share', 'GPU memory'],
      (st.placement || []).map((p) => [String(p.replica || 0), h('a', { href: '#/nodes' }, p.node), String(p.gpuIndex), h('code', {}, p.gpuUUID),
        p.milliGPU >= 1000 ? 'whole GPU' : gpus(p.milliGPU) + ' GPU', mib(p.memoryMiB)]),
      { empty: st.phase === 'Pending' ? 'Not placed yet: see why above.' : 'Holds no GPU now.' }));
    replace(eventsBox, table('Events', ['Time', 'Type', 'Reason', 'Phase', 'Message'],
      evs.slice().reverse().map((e) => ({
        attrs: { class: e.type === 'Warning' ? 'warning' : '' },
        cells: [ago(e.time), e.type === 'Warning' ? h('span', { class: 'badge warn' }, 'Warning') : e.type, e.reason,
          e.from || e.to ? (e.from || '—') + ' → ' + (e.to || '—') : '', e.message || ''],
      })), { empty: 'No events yet.', cls: 'events' }));
  }

  // Open: what a running workload serves on its declared ports, through
  // the server's proxy (/w/ID/PORT/), in a new tab that neither reaches
  // back to this page nor names it. The token in the address signs the tab
  // in: the proxy exchanges it for a cookie of that path and drops it from
  // the address at once.
  function openLinks(wl) {
    const ports = wl.ports || [];
    return ports.map((p) => h('a', {
      class: 'open-link', href: '/w/' + encodeURIComponent(wl.id) + '/' + p.port + '/?gpufleet-token=' + encodeURIComponent(token()),
      target: '_blank', rel: 'noopener noreferrer', 'data-port': p.port, title: 'Open port ' + p.port + ' in a new tab',
    }, ports.length === 1 ? 'Open' : 'Open ' + (p.name || p.port)));
  }

  // The workload's GPU use over time, from the server's samples
  // (GET /workloads/ID/usage): utilisation, and memory against its share.
  async function refreshUsage(wl) {
    let hist;
    try {
      hist = await api('/workloads/' + encodeURIComponent(id) + '/usage?window=' + usageWindow, { signal: ac.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(usageBox);
      usageNote.textContent = e.status === 404 ? 'This server keeps no per-workload usage history.' : 'Cannot read its GPU use: ' + e.message;
      return;
    }
    const st = wl.status;
    const shareMiB = (st.placement || []).reduce((s, p) => s + (p.memoryMiB || 0), 0);
    const points = hist.points.map((p) => ({ t: Date.parse(p.time), util: p.gpuUtilization * 100, mem: p.gpuMemoryUsedMiB / 1024,
      share: shareMiB ? shareMiB / 1024 : undefined, attempt: p.attempt }));
    if (!points.length) {
      replace(usageBox);
      usageNote.textContent = st.phase === 'Pending' ? 'Not sampled yet: the chart starts once the workload runs.'
        : hist.intervalSeconds ? 'No sample of this workload in the window' + (TERMINAL.includes(st.phase) ? ' (the server keeps samples in memory, for a while).' : ' yet.')
          : 'This server does not sample GPU use.';
      return;
    }
    const windowMs = USAGE_WINDOWS.find(([n]) => n === usageWindow)[1] * 60e3;
    // The right edge is now while it runs, its last sample once it ended;
    // a history shorter than the window fills the chart.
    const end = TERMINAL.includes(st.phase) ? points[points.length - 1].t : Date.now();
    const span = Math.min(windowMs, Math.max(30e3, 10 * (hist.intervalSeconds || 0) * 1000, end - points[0].t));
    const attempts = new Set(points.map((p) => p.attempt));
    replace(usageBox,
      timeChart({ id: 'util-chart', points, now: end, windowMs: span, yMax: 100, unit: '%', format: (v) => typeof v === 'number' ? Math.round(v) + '%' : '—',
        title: `GPU utilisation (mean over its GPUs), ${span < windowMs ? 'since ' + new Date(points[0].t).toISOString() : 'last ' + usageWindow}`,
        series: [{ key: 'util', label: 'Utilisation', cls: 's-util', area: true }] }),
      timeChart({ id: 'mem-chart', points, now: end, windowMs: span, yMax: shareMiB / 1024, unit: 'GiB',
        title: `GPU memory used, ${span < windowMs ? 'since ' + new Date(points[0].t).toISOString() : 'last ' + usageWindow}`,
        series: [{ key: 'mem', label: 'Memory used (GiB)', cls: 's-mem', area: true }].concat(shareMiB ? [{ key: 'share', label: 'Its share (GiB)', cls: 's-share', dashed: true }] : []) }));
    const last = hist.points[hist.points.length - 1];
    usageNote.textContent = `${hist.points.length} sample${hist.points.length === 1 ? '' : 's'}, one every ${hist.intervalSeconds} s` +
      (attempts.size > 1 ? `, of ${attempts.size} attempts` : '') + `; the latest: ${pct(last.gpuUtilization)} utilisation, ${mib(last.gpuMemoryUsedMiB)} of GPU memory.`;
  }

  async function cancel() {
    try {
      const wl = await api('/workloads/' + encodeURIComponent(id), { method: 'DELETE', signal: ac.signal });
      replace(actions, h('p', { class: 'ok', role: 'status' }, 'Cancel requested.'));
      w = wl;
      refresh();
    } catch (e) {
      if (e.name !== 'AbortError') replace(errBox, errorBox(e, 'Cannot cancel'));
    }
  }

  // Logs: follow the log until the workload ends; reconnect if the stream
  // breaks while it still runs.
  // The page keeps the log's last 2 × LOG_TAIL_BYTES characters or so: a
  // workload that writes for days must not grow the page without bound.
  let got = 0;
  let shown = 0;
  const append = (text) => {
    got += text.length;
    const atEnd = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
    logs.appendChild(document.createTextNode(text));
    shown += text.length;
    while (shown > 2 * LOG_TAIL_BYTES && logs.firstChild) {
      shown -= logs.firstChild.textContent.length;
      logs.firstChild.remove();
    }
    if (follow.checked || atEnd) logs.scrollTop = logs.scrollHeight;
    logState.textContent = 'Following the log live.';
  };
  (async () => {
    for (let attempt = 0; !ac.signal.aborted; attempt++) {
      logs.textContent = '';
      got = 0;
      shown = 0;
      logState.textContent = attempt ? 'Reconnecting…' : 'Connecting…';
      try {
        await streamLogs(id, append, ac.signal);
        logState.textContent = got ? 'End of the log: the workload has finished.' : 'The workload finished without writing anything.';
        return;
      } catch (e) {
        if (e.name === 'AbortError') return;
        if (e.status && e.status < 500 && e.status !== 429) {
          logState.textContent = 'Cannot read the log: ' + e.message;
          return;
        }
        logState.textContent = 'The log stream broke (' + e.message + '); reconnecting in 2 s.';
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  })();

  const stop = every(3000, async () => {
    if (w && TERMINAL.includes(w.status.phase)) return;
    await refresh();
  });
  return () => {
    stop();
    ac.abort();
    if (dialog.open) dialog.close();
  };
}

function whyTitle(st) {
  switch (st.phase) {
    case 'Pending':
      return 'Why it is pending';
    case 'Running':
      return st.stopRequested ? 'Stopping' : 'Running';
    default:
      return 'Outcome';
  }
}

function whyText(wl) {
  const st = wl.status;
  const parts = [];
  if (st.reason || st.message) parts.push(h('p', { class: 'reason' }, st.reason ? h('strong', {}, st.reason) : null, st.reason && st.message ? ': ' : '', st.message || ''));
  if (st.phase === 'Pending') {
    // A preemptor's node is held while its victims stop; any other
    // nomination is a starvation reservation, whose message says what it
    // waits for.
    if (st.nominatedNode) {
      parts.push(h('p', {}, st.reason === 'Preempting'
        ? `Node ${st.nominatedNode} is held for it while the workloads it preempted stop.`
        : `Node ${st.nominatedNode} is reserved for it: it has waited long, and the node drains for it.`));
    }
    if (!st.reason && !st.message) parts.push(h('p', {}, 'Waiting for the next scheduling cycle.'));
    parts.push(h('p', { class: 'help' }, 'Submitted ', ago(wl.createdAt), '. The CLI\'s ', h('code', {}, 'gpufleet why ' + wl.id), ' says the same.'));
  }
  if (st.phase === 'Running' && !st.reason && !st.message) parts.push(h('p', {}, 'Running since ', ago(st.startedAt), '.'));
  if (st.phase === 'Failed' && st.reason === 'GPUMemoryLimitExceeded') {
    parts.push(h('p', { class: 'help' }, 'It used more GPU memory than its share of the GPU; ask for more memory (or a larger fraction) and submit it again.'));
  }
  if (st.phase === 'Failed' && st.reason === 'Idle') {
    parts.push(h('p', { class: 'help' }, 'Its GPUs stayed below the idle threshold for its idle timeout, so they were given back.'));
  }
  if (!parts.length) parts.push(h('p', {}, st.phase + (st.exitCode !== null && st.exitCode !== undefined ? `, exit code ${st.exitCode}` : '') + '.'));
  return parts;
}

function usageText(u) {
  return h('span', {}, pct(u.gpuUtilization) + ' utilisation, ' + mib(u.gpuMemoryUsedMiB) + ' of GPU memory, sampled ', ago(u.sampledAt),
    u.idleSince ? h('span', {}, ' · ', h('span', { class: 'badge warn' }, 'idle'), ' since ', ago(u.idleSince)) : null);
}

// pairs shows a map as "k=v, k2=v2", or null when it is empty.
function pairs(m) {
  return m && Object.keys(m).length ? Object.entries(m).map(([k, v]) => k + '=' + v).join(', ') : null;
}

// argvView shows the argv as it is: one box per argument.
function argvView(argv) {
  return h('ol', { class: 'argv', 'aria-label': 'Command arguments' }, argv.map((a) => h('li', {}, h('code', {}, a))));
}

function confirmDialog(id, onYes) {
  const d = h('dialog', { id: 'confirm-cancel', 'aria-labelledby': 'confirm-h' });
  const no = h('button', { type: 'button', id: 'confirm-no', onclick: () => d.close() }, 'Keep it running');
  const yes = h('button', { type: 'button', class: 'danger', id: 'confirm-yes', onclick: () => { d.close(); onYes(); } }, 'Yes, cancel it');
  d.append(h('h2', { id: 'confirm-h' }, 'Cancel ' + id + '?'),
    h('p', {}, 'Its processes get SIGTERM, then SIGKILL after its grace period. It ends Cancelled; this cannot be undone.'),
    h('div', { class: 'actions' }, no, yes));
  d.addEventListener('close', () => {
    const b = document.getElementById('cancel');
    if (b) b.focus();
  });
  // Safer default: focus "keep it" when the dialog opens.
  d.addEventListener('toggle', () => {
    if (d.open) no.focus();
  });
  return d;
}
