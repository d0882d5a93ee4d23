// An SVG time chart drawn from scratch: areas and lines over a time axis,
// with a grid, axis labels and a legend. Colours come from CSS classes (the
// Content-Security-Policy allows no inline styles).

import { h, duration } from './dom.js';

const W = 800;
const H = 210;
const PAD = { left: 44, right: 16, top: 14, bottom: 30 };

// niceStep picks a grid step of 1, 2 or 5 times a power of ten giving at
// most about n lines up to max.
function niceStep(max, n) {
  const raw = max / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// timeChart draws series over points: [{t: Date ms, ...values}].
// series: [{key, label, cls, area: bool, dashed: bool}]. yMax is the top of
// the axis (at least the largest value). now is the right edge (ms),
// windowMs the width of the axis. id names the chart's title and
// description elements (one page may hold several charts); format writes
// a value on the axis and in the description.
export function timeChart({ points, series, yMax, now, windowMs, title, unit = 'GPUs', id = 'chart', format = fmt }) {
  const x0 = now - windowMs;
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  let top = yMax || 0;
  for (const p of points) for (const s of series) if (typeof p[s.key] === 'number') top = Math.max(top, p[s.key]);
  if (top <= 0) top = 1;
  const step = niceStep(top, 5);
  top = Math.ceil(top / step) * step;
  const X = (t) => PAD.left + ((t - x0) / windowMs) * innerW;
  const Y = (v) => PAD.top + innerH - (v / top) * innerH;

  const svg = h('svg:svg', {
    viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-labelledby': `${id}-title ${id}-desc`,
  });
  svg.appendChild(h('svg:title', { id: id + '-title' }, title));
  const last = points[points.length - 1];
  const desc = last
    ? series.map((s) => `${s.label}: ${format(last[s.key])}`).join('; ') + ` ${unit} at the latest point`
    : 'No data yet.';
  svg.appendChild(h('svg:desc', { id: id + '-desc' }, desc));

  // Grid and the value axis.
  const grid = h('svg:g', { class: 'grid' });
  for (let v = 0; v <= top + 1e-9; v += step) {
    grid.appendChild(h('svg:line', { x1: PAD.left, x2: W - PAD.right, y1: Y(v), y2: Y(v) }));
    grid.appendChild(h('svg:text', { x: PAD.left - 6, y: Y(v) + 4, class: 'ylabel' }, format(v)));
  }
  // The time axis: ticks at round minutes/hours before now.
  const tStep = niceTimeStep(windowMs);
  for (let d = 0; d <= windowMs + 1; d += tStep) {
    const x = X(now - d);
    grid.appendChild(h('svg:line', { x1: x, x2: x, y1: PAD.top, y2: PAD.top + innerH, class: 'vgrid' }));
    grid.appendChild(h('svg:text', { x, y: H - 10, class: 'xlabel' }, d === 0 ? 'now' : '−' + duration(d / 1000).replace(/ 0s$/, '').replace(/ 0m$/, '')));
  }
  svg.appendChild(grid);

  const visible = points.filter((p) => p.t >= x0 - 1 && p.t <= now + 1);
  for (const s of series) {
    const pts = visible.filter((p) => typeof p[s.key] === 'number');
    if (!pts.length) continue;
    const line = pts.map((p, i) => (i ? 'L' : 'M') + X(p.t).toFixed(1) + ' ' + Y(p[s.key]).toFixed(1)).join(' ');
    if (s.area) {
      const area = line + ` L${X(pts[pts.length - 1].t).toFixed(1)} ${Y(0)} L${X(pts[0].t).toFixed(1)} ${Y(0)} Z`;
      svg.appendChild(h('svg:path', { d: area, class: 'area ' + s.cls }));
    }
    svg.appendChild(h('svg:path', { d: line, class: 'line ' + s.cls + (s.dashed ? ' dashed' : '') }));
    if (pts.length === 1) {
      svg.appendChild(h('svg:circle', { cx: X(pts[0].t), cy: Y(pts[0][s.key]), r: 3, class: 'dot ' + s.cls }));
    }
  }
  svg.appendChild(h('svg:line', { x1: PAD.left, x2: W - PAD.right, y1: Y(0), y2: Y(0), class: 'axis' }));

  const legend = h('ul', { class: 'legend' }, series.map((s) =>
    h('li', {}, h('span', { class: 'swatch ' + s.cls + (s.dashed ? ' dashed' : ''), 'aria-hidden': 'true' }), s.label)));
  return h('figure', { class: 'chart-box' }, svg, legend);
}

function fmt(v) {
  if (typeof v !== 'number') return '—';
  return String(Math.round(v * 100) / 100);
}

function niceTimeStep(windowMs) {
  const min = 60e3;
  for (const s of [10e3, 15e3, 30e3, min, 2 * min, 5 * min, 10 * min, 15 * min, 30 * min, 60 * min, 120 * min, 180 * min, 360 * min]) {
    if (windowMs / s <= 7) return s;
  }
  return 720 * min;
}
