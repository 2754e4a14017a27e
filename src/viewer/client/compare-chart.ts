/**
 * The compare page's chart, as plain SVG: per group (a type), run A's and run B's accuracy over the
 * paired tasks side by side, each with its 95% bootstrap whisker. Every bar carries its numbers in
 * data attributes and a <title>, as the run page's charts do.
 */
import type { ComparisonFigures } from '../../shared/output/compare-runs.ts';
import { AXIS_H, LABEL_W, xScale } from './charts.ts';
import { clip, pct, s } from './dom.ts';

const BAR_H = 12;
const GROUP_H = 2 * BAR_H + 12;
const PLOT_W = 260;
const VALUE_W = 90;
const WIDTH = LABEL_W + PLOT_W + VALUE_W;
const x = xScale(PLOT_W);

function bar(side: 'a' | 'b', group: string, accuracy: number | null, ci: [number, number] | null, y: number): SVGGElement {
  const tip = `${group}, run ${side.toUpperCase()}: ${pct(accuracy)}${ci ? ` (95% CI ${pct(ci[0])}–${pct(ci[1])})` : ''}`;
  const g = s('g', { class: `side side-${side}`, 'data-side': side, 'data-group': group, 'data-accuracy': accuracy ?? '' }, s('title', null, tip));
  g.append(s('rect', { x: x(0), y, width: PLOT_W, height: BAR_H, class: 'track' }));
  if (accuracy !== null) g.append(s('rect', { x: x(0), y, width: accuracy * PLOT_W, height: BAR_H, class: `bar bar-${side}` }));
  if (ci) {
    const mid = y + BAR_H / 2;
    g.append(
      s('line', { x1: x(ci[0]), x2: x(ci[1]), y1: mid, y2: mid, class: 'whisker', 'data-lo': ci[0], 'data-hi': ci[1] }),
      s('line', { x1: x(ci[0]), x2: x(ci[0]), y1: mid - 4, y2: mid + 4, class: 'whisker' }),
      s('line', { x1: x(ci[1]), x2: x(ci[1]), y1: mid - 4, y2: mid + 4, class: 'whisker' }),
    );
  }
  g.append(s('text', { x: x(1) + 8, y: y + BAR_H - 2, class: 'value' }, `${side.toUpperCase()} ${pct(accuracy)}`));
  return g;
}

/** Both runs' accuracy per group with their intervals; `groups` in the order to draw them. */
export function compareChart(groups: Record<string, ComparisonFigures>, label: string): SVGSVGElement {
  const entries = Object.entries(groups);
  const height = entries.length * GROUP_H;
  const svg = s('svg', { class: 'chart compare', viewBox: `0 0 ${WIDTH} ${height + AXIS_H}`, role: 'img', 'aria-label': label });
  const axis = s('g', { class: 'axis' });
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    axis.append(s('line', { x1: x(t), x2: x(t), y1: 0, y2: height, class: 'grid' }), s('text', { x: x(t), y: height + 15, 'text-anchor': 'middle' }, pct(t, 0)));
  }
  svg.append(axis);
  entries.forEach(([name, f], i) => {
    const y = i * GROUP_H + 4;
    const row = s('g', { class: 'compare-row', 'data-group': name, 'data-pairs': f.pairs });
    row.append(
      s('text', { x: LABEL_W - 8, y: y + BAR_H + 4, 'text-anchor': 'end', class: 'name' }, clip(name, 30), s('title', null, `${name}: ${f.pairs} paired tasks`)),
      bar('a', name, f.accuracy_a, f.accuracy_a_ci95, y),
      bar('b', name, f.accuracy_b, f.accuracy_b_ci95, y + BAR_H + 2),
    );
    svg.append(row);
  });
  return svg;
}
