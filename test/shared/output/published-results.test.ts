/**
 * Published rows of two kinds: the paper's (no tools) and tool-augmented results (the model runs
 * code), each with its pass count, step budget and source, printed in a block of its own; a
 * tool-augmented row without them is refused, naming the file, the key and both shapes.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { publishedLines, readPublishedResults } from '../../../src/shared/output/published-results.ts';
import { reportRows } from '../../../src/cli/metrics-table.ts';
import { aggregateMetrics } from '../../../src/shared/output/metrics.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterEach(removeTmpDirs);

const FILE = `rows:
  - name: Human adults
    overall: 94.1
  - name: Some VLM with a sandbox
    kind: tool_augmented
    overall: 38.5
    passes: 3
    step_budget: 50
    source: our run babyvision-opencode-20261201
  - name: Some VLM
    overall: 19.2
`;

describe('published rows of two kinds', () => {
  it('prints the tool-augmented rows in their own block, with pass count, step budget and source', () => {
    const file = path.join(createTmpDir(), 'mine.yaml');
    writeFileSync(file, FILE);
    const rows = readPublishedResults(file);
    expect(rows[1]).toEqual({ kind: 'tool_augmented', name: 'Some VLM with a sandbox', overall: 38.5, passes: 3, step_budget: 50, source: 'our run babyvision-opencode-20261201' });
    expect(publishedLines(rows)).toEqual([
      ['published (paper, no tools)', ''],
      ['  Human adults', '94.1'],
      ['  Some VLM', '19.2'],
      ['published (tool-augmented: the model runs code)', ''],
      ['  Some VLM with a sandbox', '38.5  (3 passes, 50 steps; our run babyvision-opencode-20261201)'],
    ]);
    // Beside the run's paper table, as the summary prints it.
    const m = aggregateMetrics([{ task_id: 't', repeat: 0, type: 'T', subtype: 'S', reward: 1, failure_kind: null, stop_reason: 'answered', turns: 1, tool_calls: 0, input_tokens: 1, output_tokens: 1, wall_s: 1 }]);
    const labels = reportRows(m, rows).map((r) => String(r[0]));
    expect(labels.indexOf('published (tool-augmented: the model runs code)')).toBeGreaterThan(labels.indexOf('published (paper, no tools)'));
  });

  it('refuses a tool-augmented row without its step budget, naming the file, the key and both shapes', () => {
    const file = path.join(createTmpDir(), 'bad.yaml');
    writeFileSync(file, 'rows:\n  - name: X\n    kind: tool_augmented\n    overall: 30\n    passes: 1\n    source: a paper\n');
    expect(() => readPublishedResults(file)).toThrow(new RegExp(`^${file.replace(/[.]/g, '\\.')} \\(report\\.published_results\\): rows\\.0\\.step_budget: .*\\{kind: tool_augmented, name, overall, passes, step_budget, source, by_type\\?\\}$`));
    writeFileSync(file, 'rows:\n  - name: X\n    kind: with_tools\n    overall: 30\n');
    expect(() => readPublishedResults(file)).toThrow(/rows\.0\.kind: /);
  });
});
