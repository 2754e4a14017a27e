/** The paper table's overall line says what the masked rollouts (counted wrong) are: an all-masked pass is no score. */
import { describe, expect, it } from 'vitest';
import { paperTable, paperTableLines, type PaperRow } from '../../../src/shared/output/paper-table.ts';

const row = (i: number, masked: boolean, reward: 0 | 1 | null = masked ? null : 1): PaperRow => ({
  repeat: 0, type: 'T', subtype: `S${i % 2}`, reward, failure_kind: masked ? 'judge_failed' : null,
});

describe('paperTableLines', () => {
  it('says on the paper-table line that every rollout was masked', () => {
    const t = paperTable([row(0, true), row(1, true), row(2, true)], 1);
    expect(t).toMatchObject({ rollouts: 3, masked: 3 });
    const [first] = paperTableLines(t, 'paper table (1 pass)');
    expect(first).toEqual(['paper table (1 pass)', '0.0 ± 0.0  (every rollout masked, all 3: nothing was scored, this is no score)']);
  });

  it('counts the masked ones of a mixed pass, and says nothing when none is masked', () => {
    const mixed = paperTableLines(paperTable([row(0, false), row(1, true), row(2, false), row(3, false, 0)], 1));
    expect(mixed[0]).toEqual(['overall', '50.0 ± 0.0  (1 of 4 rollouts masked, counted wrong)']);
    const clean = paperTableLines(paperTable([row(0, false), row(1, false, 0)], 1));
    expect(clean[0]).toEqual(['overall', '50.0 ± 0.0']);
    // A table of an older metrics file (no counts) prints as before.
    const { rollouts: _r, masked: _m, ...old } = paperTable([row(0, true)], 1);
    expect(paperTableLines(old)[0]).toEqual(['overall', '0.0 ± 0.0']);
  });
});
