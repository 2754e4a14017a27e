/**
 * `vcfleet export`'s progress (cli/commands/export.ts): a plain line every 5 s off a terminal, a line
 * redrawn at most every 200 ms on one and closed with a newline once, nothing for a short export.
 */
import { describe, expect, it } from 'vitest';
import { exportProgress } from '../../../src/cli/commands/export.ts';

function sink(isTTY: boolean) {
  const out: string[] = [];
  return { out, stream: { isTTY, write: (s: string) => out.push(s) } };
}

describe('exportProgress', () => {
  it('writes a plain line at most every 5 s off a terminal', () => {
    let t = 0;
    const { out, stream } = sink(false);
    const p = exportProgress(stream, () => t);
    p.update(1, 3104);
    t = 4999;
    p.update(2, 3104);
    t = 5000;
    p.update(1552, 3104);
    t = 11_000;
    p.update(3104, 3104);
    p.end();
    expect(out).toEqual(['exporting: 1552 / 3104 rollouts (50%)\n', 'exporting: 3104 / 3104 rollouts (100%)\n']);
  });

  it('redraws one line on a terminal and ends it once; a short export writes nothing', () => {
    let t = 0;
    const { out, stream } = sink(true);
    const p = exportProgress(stream, () => t);
    t = 250;
    p.update(10, 40);
    p.end();
    p.end();
    expect(out).toEqual(['\rexporting: 10 / 40 rollouts (25%)', '\n']);
    const quiet = sink(true);
    const q = exportProgress(quiet.stream, () => 0);
    q.update(2, 2);
    q.end();
    expect(quiet.out).toEqual([]);
  });
});
