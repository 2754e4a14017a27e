/**
 * The run page's charts, as plain SVG: accuracy by group with 95% whiskers, the outcome breakdown,
 * and histograms. Every mark carries its numbers in data attributes and a <title> tooltip, so a
 * person can hover and a test can read what was drawn.
 */
import type { GroupStat } from '../group-ci.ts';
import type { Histogram } from '../histogram.ts';
import type { OutcomeCount } from '../run-view.ts';
import { clip, num, pct, s } from './dom.ts';

const ROW_H = 22;
/** Every bar chart's frame (compare-chart.ts's too): a column of names, the plot, a column of values, an axis under them. */
export const LABEL_W = 190;
export const AXIS_H = 22;
/** Where a fraction (0..1) falls on a plot `plotW` wide. */
export const xScale = (plotW: number) => (fraction: number) => LABEL_W + fraction * plotW;

const PLOT_W = 240;
const VALUE_W = 125;
const WIDTH = LABEL_W + PLOT_W + VALUE_W;
const x = xScale(PLOT_W);

function axis(height: number): SVGGElement {
  const g = s('g', { class: 'axis' });
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    g.append(
      s('line', { x1: x(t), x2: x(t), y1: 0, y2: height, class: 'grid' }),
      s('text', { x: x(t), y: height + 15, 'text-anchor': 'middle' }, pct(t, 0)),
    );
  }
  return g;
}

function groupRow(g: GroupStat, y: number): SVGGElement {
  const ci = g.ci95 ? `, 95% CI ${pct(g.ci95[0])}–${pct(g.ci95[1])}` : '';
  const tip = `${g.type && g.type !== g.name ? `${g.type} / ` : ''}${g.name}: ${pct(g.accuracy)} (${g.correct}/${g.scored} scored, ${g.rollouts} rollouts${ci})`;
  const mid = y + ROW_H / 2;
  const row = s('g', {
    class: 'bar-row', 'data-group': g.name, 'data-accuracy': g.accuracy ?? '', 'data-correct': g.correct, 'data-scored': g.scored,
  }, s('title', null, tip));
  row.append(
    s('text', { x: LABEL_W - 8, y: mid + 4, 'text-anchor': 'end', class: 'name' }, clip(g.name, 30)),
    s('rect', { x: x(0), y: y + 3, width: PLOT_W, height: ROW_H - 6, class: 'track' }),
  );
  if (g.accuracy !== null) row.append(s('rect', { x: x(0), y: y + 3, width: g.accuracy * PLOT_W, height: ROW_H - 6, class: 'bar' }));
  if (g.ci95) {
    const [lo, hi] = g.ci95;
    row.append(
      s('line', { x1: x(lo), x2: x(hi), y1: mid, y2: mid, class: 'whisker', 'data-lo': lo, 'data-hi': hi }),
      s('line', { x1: x(lo), x2: x(lo), y1: mid - 5, y2: mid + 5, class: 'whisker' }),
      s('line', { x1: x(hi), x2: x(hi), y1: mid - 5, y2: mid + 5, class: 'whisker' }),
    );
  }
  const value = g.accuracy === null ? `– (${g.rollouts} unscored)` : `${pct(g.accuracy)} (${g.correct}/${g.scored})`;
  row.append(s('text', { x: x(1) + 8, y: mid + 4, class: 'value' }, value));
  return row;
}

/**
 * Horizontal accuracy bars with Wilson whiskers, one row per group; with `byType`, a heading row
 * before each type's subtypes. `mean` draws the run's mean as a dashed line.
 */
export function accuracyChart(groups: readonly GroupStat[], opts: { byType?: boolean; mean: number | null; label: string }): SVGSVGElement {
  const rows: SVGElement[] = [];
  let y = 0;
  let type: string | null = null;
  for (const g of groups) {
    if (opts.byType && g.type !== type) {
      type = g.type;
      rows.push(s('text', { x: 4, y: y + 15, class: 'heading' }, clip(type ?? '', 60)));
      y += ROW_H;
    }
    rows.push(groupRow(g, y));
    y += ROW_H;
  }
  const height = Math.max(y, ROW_H);
  const svg = s('svg', { viewBox: `0 0 ${WIDTH} ${height + AXIS_H}`, class: 'chart accuracy', role: 'img', 'aria-label': opts.label });
  svg.append(axis(height), ...rows);
  if (opts.mean !== null) {
    svg.append(s('line', { x1: x(opts.mean), x2: x(opts.mean), y1: 0, y2: height, class: 'mean' }, s('title', null, `run mean ${pct(opts.mean)}`)));
  }
  return svg;
}

/** One bar per outcome, length by count; masked outcomes drawn apart. */
export function outcomeChart(outcomes: readonly OutcomeCount[]): SVGSVGElement {
  const total = outcomes.reduce((a, o) => a + o.count, 0);
  const most = Math.max(1, ...outcomes.map((o) => o.count));
  const height = outcomes.length * ROW_H;
  const svg = s('svg', { viewBox: `0 0 ${WIDTH} ${height}`, class: 'chart outcomes', role: 'img', 'aria-label': 'rollouts by outcome' });
  outcomes.forEach((o, i) => {
    const y = i * ROW_H;
    const share = total ? o.count / total : 0;
    const label = o.masked ? `${o.outcome} (masked)` : o.outcome;
    svg.append(s('g', { class: `bar-row${o.masked ? ' masked' : ''}`, 'data-outcome': o.outcome, 'data-count': o.count },
      s('title', null, `${label}: ${num(o.count)} of ${num(total)} rollouts (${pct(share)})`),
      s('text', { x: LABEL_W - 8, y: y + 15, 'text-anchor': 'end', class: 'name' }, label),
      s('rect', { x: x(0), y: y + 3, width: (o.count / most) * PLOT_W, height: ROW_H - 6, class: 'bar' }),
      s('text', { x: x(0) + (o.count / most) * PLOT_W + 6, y: y + 15, class: 'value' }, `${num(o.count)} (${pct(share)})`),
    ));
  });
  return svg;
}

const edge = (v: number, integer: boolean) => (integer ? String(v) : Number(v.toPrecision(4)).toString());

/** A histogram: one column per bin, height by count; `unit` names what is counted along x. */
export function histogramChart(h: Histogram, unit: string): SVGSVGElement {
  const W = 300;
  const H = 150;
  const pad = { left: 34, bottom: 34, top: 8 };
  const plotW = W - pad.left - 6;
  const plotH = H - pad.bottom - pad.top;
  const most = Math.max(1, ...h.bins.map((b) => b.count));
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart histogram', role: 'img', 'aria-label': `histogram of ${unit}`, 'data-total': h.total });
  svg.append(
    s('text', { x: pad.left - 4, y: pad.top + 8, 'text-anchor': 'end', class: 'tick' }, num(most)),
    s('text', { x: pad.left - 4, y: pad.top + plotH, 'text-anchor': 'end', class: 'tick' }, '0'),
    s('text', { x: pad.left + plotW / 2, y: H - 4, 'text-anchor': 'middle', class: 'unit' }, unit),
  );
  const colW = h.bins.length ? plotW / h.bins.length : plotW;
  h.bins.forEach((b, i) => {
    const barH = (b.count / most) * plotH;
    const range = h.integer && b.hi - b.lo === 1 ? edge(b.lo, true) : `${edge(b.lo, h.integer)}–${edge(h.integer ? b.hi - 1 : b.hi, h.integer)}`;
    svg.append(s('rect', {
      x: pad.left + i * colW + 1, y: pad.top + plotH - barH, width: Math.max(1, colW - 2), height: barH, class: 'bar',
      'data-lo': b.lo, 'data-hi': b.hi, 'data-count': b.count,
    }, s('title', null, `${range} ${unit}: ${num(b.count)} rollouts`)));
  });
  // At most about 7 labels, on every k-th bin, so that they never overlap.
  const every = Math.ceil(h.bins.length / 7);
  const ticks = h.bins.map((_, i) => i).filter((i) => i % every === 0);
  for (const i of ticks) {
    const b = h.bins[i];
    const label = h.integer && b.hi - b.lo === 1 ? edge(b.lo, true) : edge(b.lo, h.integer);
    svg.append(s('text', { x: pad.left + (i + (h.integer && b.hi - b.lo === 1 ? 0.5 : 0)) * colW, y: pad.top + plotH + 14, 'text-anchor': 'middle', class: 'tick' }, label));
  }
  return svg;
}
