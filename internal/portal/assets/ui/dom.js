// Small helpers to build the page. Text always goes in as text nodes, never
// as HTML: names, commands and logs come from users.

// h builds an element: h('a', {href: '#/x', class: 'c'}, 'text', child).
// Attributes whose value is null, undefined or false are left out; "on*"
// functions become event listeners.
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// replace puts children in el instead of what it held.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// gpus formats milli-GPU as GPUs: 250 → "0.25", 2000 → "2".
export function gpus(milli) {
  const v = (milli || 0) / 1000;
  return String(Math.round(v * 1000) / 1000);
}

// mib formats MiB: 81920 → "80 GiB", 512 → "512 MiB".
export function mib(v) {
  if (v === null || v === undefined) return '—';
  if (v >= 1024 && v % 1024 === 0) return (v / 1024) + ' GiB';
  if (v >= 1024) return (v / 1024).toFixed(1) + ' GiB';
  return v + ' MiB';
}

export function pct(ratio) {
  return Math.round(ratio * 100) + '%';
}

// duration formats seconds: 75 → "1m 15s".
export function duration(sec) {
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return sec + 's';
  const m = Math.floor(sec / 60);
  if (m < 60) return m + 'm ' + (sec % 60) + 's';
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + 'h ' + (m % 60) + 'm';
  return Math.floor(hr / 24) + 'd ' + (hr % 24) + 'h';
}

// ago is a <time> saying how long ago t was, with the RFC 3339 time as its
// title.
export function ago(t) {
  if (!t) return h('span', { class: 'muted' }, '—');
  const d = new Date(t);
  const sec = (Date.now() - d.getTime()) / 1000;
  const text = sec < 5 ? 'just now' : sec >= 0 ? duration(sec) + ' ago' : 'in ' + duration(-sec);
  return h('time', { datetime: t, title: t }, text);
}

// since is a <time> saying how long it has been since t ("3m 5s"), with
// the RFC 3339 time as its title.
export function since(t) {
  if (!t) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: t, title: t }, duration((Date.now() - new Date(t).getTime()) / 1000));
}

// rfc3339 is a <time> showing the RFC 3339 time to the second (the full
// time, fractions included, is its title), with how long ago it was.
export function rfc3339(t) {
  if (!t) return h('span', { class: 'muted' }, '—');
  const short = t.replace(/\.\d+(Z|[+-]\d\d:\d\d)$/, '$1');
  const sec = (Date.now() - new Date(t).getTime()) / 1000;
  return h('span', {}, h('time', { datetime: t, title: t }, short), sec >= 0 ? h('span', { class: 'muted' }, ' (' + (sec < 5 ? 'just now' : duration(sec) + ' ago') + ')') : null);
}

// phase is a badge for a workload phase.
export function phase(p) {
  return h('span', { class: 'badge phase-' + String(p || 'unknown').toLowerCase() }, p || 'unknown');
}

// askGPUs says what a workload asks for: GPUs, or GPU memory, a gang's as
// replicas × each replica's ask, as the CLI prints it: "2", "4×0.5",
// "20 GiB of GPU memory", "3×20 GiB of GPU memory".
export function askGPUs(w) {
  const r = w.resources || {};
  const rep = w.replicas > 1 ? `${w.replicas}×` : '';
  if (r.gpuMemoryMiB) return rep + mib(r.gpuMemoryMiB) + ' of GPU memory';
  return rep + String(r.gpus);
}

// placement says where a workload's tasks run, node by node:
// "n1 [GPU 0, GPU 1 ×0.25]".
export function placement(w) {
  const ps = (w.status && w.status.placement) || [];
  if (!ps.length) return '—';
  const nodes = [...new Set(ps.map((p) => p.node))];
  return nodes.map((n) => n + ' [' + ps.filter((p) => p.node === n).map((p) => 'GPU ' + p.gpuIndex + (p.milliGPU < 1000 ? ' ×' + gpus(p.milliGPU) : '')).join(', ') + ']').join('; ');
}

// bar is a horizontal bar: value of max, with optional markers
// [{at, label, class}]. The width is set through the CSSOM, which the
// Content-Security-Policy allows (style attributes it does not).
export function bar(value, max, { label, cls = '', markers = [] } = {}) {
  const frac = max > 0 ? Math.min(1, Math.max(0, value / max)) : 0;
  const fill = h('span', { class: 'bar-fill ' + cls });
  fill.style.width = (frac * 100).toFixed(1) + '%';
  const el = h('span', { class: 'bar', role: 'img', 'aria-label': label || pct(frac) }, fill);
  for (const m of markers) {
    if (!(max > 0)) continue;
    const mk = h('span', { class: 'bar-marker ' + (m.class || ''), title: m.label });
    mk.style.left = (Math.min(1, Math.max(0, m.at / max)) * 100).toFixed(1) + '%';
    el.appendChild(mk);
  }
  return el;
}

// errorBox shows an error plainly.
export function errorBox(e, what) {
  const msg = e && e.message ? e.message : String(e);
  const status = e && e.status ? ' (HTTP ' + e.status + ')' : '';
  return h('div', { class: 'error', role: 'alert' }, (what ? what + ': ' : '') + msg + status);
}

// table builds a table from column headers and rows of cells.
export function table(caption, headers, rows, { empty = 'None.', cls = '' } = {}) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', { class: cls },
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows.map((r) => h('tr', r.attrs || {}, (r.cells || r).map((c) => h('td', {}, c)))))));
}

// dl builds a description list from [term, value] pairs, leaving out
// pairs whose value is null or undefined.
export function dl(pairs, cls = 'props') {
  return h('dl', { class: cls }, pairs.filter((p) => p[1] !== null && p[1] !== undefined && p[1] !== '')
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// every calls f now and then every ms milliseconds, one call at a time,
// until the returned function is called.
export function every(ms, f) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    try {
      await f();
    } finally {
      if (!stopped) timer = setTimeout(tick, ms);
    }
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

// wid is a workload ID that never breaks across lines.
export function wid(id, cls = '') {
  return h('span', { class: ('wid ' + cls).trim() }, id);
}

// workloadLink links to a workload's page: its name, and its ID below
// (the ID alone when it has no name).
export function workloadLink(w) {
  const href = '#/workloads/' + encodeURIComponent(w.id);
  if (!w.name) return h('a', { href, class: 'wl-link' }, wid(w.id));
  return h('a', { href, class: 'wl-link' }, h('span', { class: 'wl-name', title: w.name }, w.name), wid(w.id, 'muted small'));
}

// clipped shows text cut to two lines at most in a narrow column, with
// all of it in its title (shown on hover, read by screen readers).
export function clipped(text, empty = '—') {
  if (!text) return h('span', { class: 'muted' }, empty);
  return h('span', { class: 'clip', title: text }, text);
}
