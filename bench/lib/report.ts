/** The one table every benchmark adds its rows to, as Markdown. */

export interface BenchRow {
  bench: string;
  metric: string;
  value: string;
  /** The target, when the issue sets one. */
  target?: string;
  /** Whether the target is met (undefined when there is none). */
  ok?: boolean;
  note?: string;
}

const cell = (s: string | undefined) => (s ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function markdownTable(rows: readonly BenchRow[]): string {
  const lines = ['| Benchmark | Measure | Value | Target | Notes |', '|---|---|---|---|---|'];
  for (const r of rows) {
    const target = r.target ? `${r.target} ${r.ok === undefined ? '' : r.ok ? '(met)' : '(**not met**)'}`.trim() : '';
    lines.push(`| ${cell(r.bench)} | ${cell(r.metric)} | ${cell(r.value)} | ${cell(target)} | ${cell(r.note)} |`);
  }
  return lines.join('\n');
}
