// Small live charts of the mesh's rates, drawn as SVG from the samples the
// bridge streams (GET /ops/mesh/events): no charting library.

import { h, svg } from './dom.js';

const W = 300;
const H = 72;
const PAD = 4;

// createChart adds a chart of one metric of the samples (e.g.
// "turns_per_s") to parent; update(samples) redraws it from the samples,
// oldest first, over the time they span (a minute at least, windowSecs at
// most) up to the newest.
export function createChart(parent, { metric, label, unit = '', digits = 1, windowSecs = 300 }) {
  const line = svg('polyline', { class: 'chart-line', fill: 'none', points: '' });
  const area = svg('polygon', { class: 'chart-area', points: '' });
  const plot = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label }, area, line);
  const value = h('span', { class: 'chart-value', text: '–' });
  const top = h('span', { class: 'chart-max muted small', text: '' });
  const fig = h('figure', { class: 'chart', dataset: { metric } },
    h('figcaption', {}, h('span', { class: 'chart-label', text: label }), value), plot, top);
  parent.append(fig);

  function update(samples) {
    const now = samples.length ? Date.parse(samples[samples.length - 1].at) : Date.now();
    // The span shown: the samples there are, at least a minute, at most
    // the window.
    const first = samples.length ? Date.parse(samples[0].at) : now;
    const span = Math.min(windowSecs, Math.max(60, (now - first) / 1000));
    const from = now - span * 1000;
    const pts = samples.filter((s) => Date.parse(s.at) >= from).map((s) => [Date.parse(s.at), Number(s[metric]) || 0]);
    const max = Math.max(niceMax(Math.max(0, ...pts.map((p) => p[1]))), 1e-9);
    const x = (t) => PAD + ((t - from) / (span * 1000)) * (W - 2 * PAD);
    const y = (v) => H - PAD - (v / max) * (H - 2 * PAD);
    const coords = pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    line.setAttribute('points', coords.join(' '));
    area.setAttribute('points', coords.length ? `${x(pts[0][0]).toFixed(1)},${H - PAD} ${coords.join(' ')} ${x(pts[pts.length - 1][0]).toFixed(1)},${H - PAD}` : '');
    const last = pts.length ? pts[pts.length - 1][1] : 0;
    value.textContent = `${format(last, digits)}${unit ? ` ${unit}` : ''}`;
    top.textContent = `max ${format(max, digits)} · last ${span < 90 ? `${Math.round(span)} s` : `${Math.round(span / 60)} min`}`;
    fig.dataset.last = String(last);
    fig.dataset.points = String(pts.length);
    fig.dataset.peak = String(Math.max(0, ...pts.map((p) => p[1])));
  }
  return { update };
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function format(v, digits) {
  if (v >= 100) return String(Math.round(v));
  return v.toFixed(digits).replace(/\.0+$/, '');
}
