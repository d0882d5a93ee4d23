// An SVG stacked bar chart over time, drawn from scratch like chart.js's
// time chart: one bar per step of a window, each split into its series'
// values from the bottom up, with a grid, axis labels (UTC) and a legend.
// Colours come from CSS classes (the Content-Security-Policy allows no
// inline styles). Every segment carries its value (data-value) and says it
// in its title, shown on hover.

import { h } from './dom.js';

const W = 800;
const H = 230;
const PAD = { left: 56, right: 16, top: 14, bottom: 30 };
const HOUR = 3600e3;

// niceStep picks a grid step of 1, 2 or 5 times a power of ten giving at
// most about n lines up to max.
function niceStep(max, n) {
  const raw = max / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// stackedBars draws points [{t: start of the step (ms), values: {key: n}}]
// between from and to (ms), each step stepMs wide. series [{key, label,
// cls, total}] are stacked in their order, the first at the bottom; a
// legend names each with its total (format(total)). id names the chart's
// title and description; format writes a value, axisFormat one on the axis.
export function stackedBars({ points, series, from, to, stepMs, title, id = 'bars', format = String, axisFormat = axisNumber, empty = 'Nothing in this window.' }) {
  const span = Math.max(1, to - from);
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  let top = 0;
  for (const p of points) top = Math.max(top, series.reduce((s, se) => s + (p.values[se.key] || 0), 0));
  if (!(top > 0)) top = 1;
  const step = niceStep(top, 5);
  top = Math.ceil(top / step - 1e-9) * step;
  const X = (t) => PAD.left + ((t - from) / span) * innerW;
  const Y = (v) => PAD.top + innerH - (v / top) * innerH;

  const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart bars', role: 'img', 'aria-labelledby': `${id}-title ${id}-desc` });
  svg.appendChild(h('svg:title', { id: id + '-title' }, title));
  const shown = series.filter((s) => s.total > 0);
  svg.appendChild(h('svg:desc', { id: id + '-desc' },
    shown.length ? 'Over the window: ' + shown.map((s) => `${s.label} ${format(s.total)}`).join('; ') + '.' : empty));

  const grid = h('svg:g', { class: 'grid' });
  for (let v = 0; v <= top + step * 1e-6; v += step) {
    grid.appendChild(h('svg:line', { x1: PAD.left, x2: W - PAD.right, y1: Y(v), y2: Y(v) }));
    grid.appendChild(h('svg:text', { x: PAD.left - 6, y: Y(v) + 4, class: 'ylabel' }, axisFormat(v)));
  }
  const tick = timeTick(span);
  for (let t = Math.ceil(from / tick) * tick; t <= to; t += tick) {
    grid.appendChild(h('svg:line', { x1: X(t), x2: X(t), y1: PAD.top, y2: PAD.top + innerH, class: 'vgrid' }));
    grid.appendChild(h('svg:text', { x: X(t), y: H - 10, class: 'xlabel' }, timeLabel(t, tick)));
  }
  svg.appendChild(grid);

  const gap = Math.min(2, (stepMs / span) * innerW * 0.15);
  const bars = h('svg:g', { class: 'stacks' });
  for (const p of points) {
    const x = X(Math.max(p.t, from));
    const w = Math.max(1, X(Math.min(p.t + stepMs, to)) - x - gap);
    let base = 0;
    const end = new Date(p.t + stepMs).toISOString().replace(/\.\d+Z$/, 'Z');
    const start = new Date(p.t).toISOString().replace(/\.\d+Z$/, 'Z');
    for (const s of series) {
      const v = p.values[s.key] || 0;
      if (!(v > 0)) continue;
      const y1 = Y(base + v);
      const rect = h('svg:rect', {
        x: x.toFixed(1), y: y1.toFixed(2), width: w.toFixed(1), height: Math.max(0, Y(base) - y1).toFixed(2),
        class: 'seg ' + s.cls, 'data-key': s.key, 'data-value': String(v), 'data-start': start,
      }, h('svg:title', {}, `${s.label}: ${format(v)} from ${start} to ${end}`));
      bars.appendChild(rect);
      base += v;
    }
  }
  svg.appendChild(bars);
  svg.appendChild(h('svg:line', { x1: PAD.left, x2: W - PAD.right, y1: Y(0), y2: Y(0), class: 'axis' }));

  const legend = h('ul', { class: 'legend' }, series.map((s) =>
    h('li', { 'data-key': s.key }, h('span', { class: 'swatch ' + s.cls, 'aria-hidden': 'true' }), s.label, h('span', { class: 'muted' }, ' ' + format(s.total || 0)))));
  return h('figure', { class: 'chart-box' }, svg, legend);
}

function axisNumber(v) {
  return String(Number(v.toPrecision(3)));
}

// timeTick is the spacing of the time axis's labels: at most 8 in the
// window, on whole UTC hours or days.
function timeTick(span) {
  for (const t of [HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR, 48 * HOUR, 96 * HOUR, 168 * HOUR]) {
    if (span / t <= 8) return t;
  }
  return 336 * HOUR;
}

// timeLabel writes a tick in UTC: the hour ("14:00") when ticks are hours
// apart, the date ("03-07") at midnight and when they are days apart.
function timeLabel(t, tick) {
  const iso = new Date(t).toISOString();
  const day = iso.slice(5, 10);
  const hm = iso.slice(11, 16);
  if (tick >= 24 * HOUR || hm === '00:00') return day;
  return hm;
}
