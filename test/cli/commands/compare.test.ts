/**
 * `vcfleet compare`: two row files, one built from the other with answers flipped and a task removed,
 * give the accuracies, difference, interval, flips, McNemar's p and the unpaired task as computed by
 * hand here (the interval by enumerating, or by the trinomial formula, independently of the code's
 * convolution); with repeats, the sign test; bad input is refused in one line naming file and line.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildRow, type Grading, type Row } from '../../../src/shared/records/rows.ts';
import { rolloutOutcome } from '../../../src/shared/records/rollout-outcome.ts';
import { compareRuns } from '../../../src/shared/output/compare-runs.ts';
import { exactBinomialP, pairedBootstrapCi95 } from '../../../src/shared/output/paired-stats.ts';
import { runCli } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';

afterEach(removeTmpDirs);

const scored = (reward: 0 | 1): Grading => ({ kind: 'scored', verdict: reward ? 'equivalent' : 'different', reason: '', reward });
const masked: Grading = { kind: 'masked', failure: 'judge_failed', error: 'judge down' };

function row(runId: string, task: string, type: string, subtype: string, grading: Grading, repeat = 0, benchmark = 'babyvision_opencode'): Row {
  return buildRow(
    { runId, benchmark, policyModel: `pol-${runId}`, judgeModel: 'judge-1', rolloutId: `${runId}-${task}-${repeat}`, repeat, task: { task_id: task, type, subtype, ans_type: 'choice', gold: 'A' } },
    rolloutOutcome({ stop_reason: 'answered', extracted_answer: 'A', turns: 1, tool_calls: 0, input_tokens: 10, output_tokens: 1, wall_s: 1 }), grading,
  );
}

/** Run a: t0..t9, rewards 1,1,1,1,0,0,1,0,1,0; types T1 (t0-t5), T2 (t6-t9); subtypes S1 (t0-t2), S2 (t3-t5), S3 (t6-t9). */
const REWARDS_A: Array<0 | 1> = [1, 1, 1, 1, 0, 0, 1, 0, 1, 0];
const typeOf = (i: number) => (i < 6 ? 'T1' : 'T2');
const subtypeOf = (i: number) => (i < 3 ? 'S1' : i < 6 ? 'S2' : 'S3');
const runA = (): Row[] => REWARDS_A.map((r, i) => row('a', `t${i}`, typeOf(i), subtypeOf(i), scored(r)));
/** Run b: run a with t0 flipped to wrong, t4, t5, t7 flipped to right, and t9 removed. */
const runB = (): Row[] =>
  REWARDS_A.slice(0, 9).map((r, i) => row('b', `t${i}`, typeOf(i), subtypeOf(i), scored([0, 4, 5, 7].includes(i) ? ((1 - r) as 0 | 1) : r)));

function writeRows(file: string, rows: readonly Row[]): string {
  writeFileSync(file, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
  return file;
}

/** The percentile interval as the code defines it, read off a sorted list of (value, probability). */
function percentileCi(dist: Array<[number, number]>): [number, number] {
  dist.sort(([x], [y]) => x - y);
  let cdf = 0;
  let lo: number | null = null;
  for (const [v, p] of dist) {
    cdf += p;
    if (lo === null && cdf >= 0.025 - 1e-12) lo = v;
    if (cdf >= 0.975 - 1e-12) return [lo!, v];
  }
  throw new Error('unreachable');
}

/** Every one of the n^n resamples of `d`, enumerated: the bootstrap by brute force. */
function enumeratedCi(d: number[]): [number, number] {
  const n = d.length;
  const dist: Array<[number, number]> = [];
  for (let code = 0; code < n ** n; code++) {
    let c = code;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      sum += d[c % n];
      c = Math.floor(c / n);
    }
    dist.push([Math.round((sum / n) * 1e9) / 1e9, 1 / n ** n]);
  }
  return percentileCi(dist);
}

/** The bootstrap of n differences in {-1, 0, +1} by the trinomial formula (n draws: k up, m down). */
function trinomialCi(n: number, up: number, down: number): [number, number] {
  const [pu, pd, p0] = [up / n, down / n, (n - up - down) / n];
  const fact = (k: number): number => (k <= 1 ? 1 : k * fact(k - 1));
  const dist: Array<[number, number]> = [];
  for (let k = 0; k <= n; k++) {
    for (let m = 0; m + k <= n; m++) {
      dist.push([(k - m) / n, (fact(n) / (fact(k) * fact(m) * fact(n - k - m))) * pu ** k * pd ** m * p0 ** (n - k - m)]);
    }
  }
  const merged = new Map<number, number>();
  for (const [v, p] of dist) merged.set(Math.round(v * 1e9) / 1e9, (merged.get(Math.round(v * 1e9) / 1e9) ?? 0) + p);
  return percentileCi([...merged.entries()]);
}

describe('compareRuns', () => {
  it('gives the accuracies, difference, interval, flips, p and the unpaired task as computed by hand', () => {
    const c = compareRuns({ name: 'A.jsonl', rows: runA() }, { name: 'B.jsonl', rows: runB() });
    expect(c.pairs).toBe(9);
    expect(c.unpaired).toEqual([{ task_id: 't9', scored_in: 'a' }]);
    expect(c.accuracy_a).toBeCloseTo(6 / 9, 6);
    expect(c.accuracy_b).toBeCloseTo(8 / 9, 6);
    expect(c.difference).toBeCloseTo(2 / 9, 6);
    expect(c.a_right_b_wrong).toBe(1);
    expect(c.a_wrong_b_right).toBe(3);
    // McNemar exact: 4 discordant, 1 against: 2 * (C(4,0) + C(4,1)) / 2^4 = 10/16.
    expect(c.mcnemar_p).toBeCloseTo(0.625, 6);
    expect(c.p_method).toBe('mcnemar_exact');
    const [lo, hi] = trinomialCi(9, 3, 1);
    expect(c.difference_ci95![0]).toBeCloseTo(lo, 6);
    expect(c.difference_ci95![1]).toBeCloseTo(hi, 6);
    expect(lo).toBeLessThan(0); // one flip against, three for: the interval crosses 0
    expect(c.flipped.map((f) => [f.task_id, f.score_a, f.score_b])).toEqual([['t0', 1, 0], ['t4', 0, 1], ['t5', 0, 1], ['t7', 0, 1]]);
    expect(c.flipped[0]).toMatchObject({ rollouts_a: ['a-t0-0'], rollouts_b: ['b-t0-0'] });
    // Per type: T1 = t0..t5 (A 4/6, B 5/6, flips 1 and 2: p = 2 * 4/8 = 1); T2 = t6..t8 (A 2/3, B 3/3, p = 2 * 1/2 = 1).
    expect(c.by_type.T1).toMatchObject({ pairs: 6, a_right_b_wrong: 1, a_wrong_b_right: 2, mcnemar_p: 1 });
    expect(c.by_type.T1.accuracy_a).toBeCloseTo(4 / 6, 6);
    expect(c.by_type.T1.accuracy_b).toBeCloseTo(5 / 6, 6);
    expect(c.by_type.T2).toMatchObject({ pairs: 3, accuracy_b: 1, a_right_b_wrong: 0, a_wrong_b_right: 1, mcnemar_p: 1 });
    expect(c.by_type.T2.difference).toBeCloseTo(1 / 3, 6);
    expect(c.by_subtype.S1).toMatchObject({ pairs: 3, accuracy_a: 1, a_right_b_wrong: 1, a_wrong_b_right: 0 });
    expect(c.by_subtype.S1.difference).toBeCloseTo(-1 / 3, 6);
    expect(c.by_subtype.S2.difference).toBeCloseTo(2 / 3, 6);
    expect(Object.keys(c.by_subtype)).toEqual(['S1', 'S2', 'S3']);
  });

  it('reads the bootstrap interval exactly: equal to every resample enumerated', () => {
    for (const d of [[-1, 0, 1, 1], [0, 0, 1, 1, -1], [-0.5, 0.5, 1], [1, 1, 1, 1], [0.25, -1, 0, 0.5, 1, 0]]) {
      const [lo, hi] = enumeratedCi(d);
      const got = pairedBootstrapCi95(d)!;
      expect(got[0], `${d}`).toBeCloseTo(lo, 6);
      expect(got[1], `${d}`).toBeCloseTo(hi, 6);
    }
    expect(pairedBootstrapCi95([])).toBeNull();
    // Scores of 7, 9, 11 and 13 repeats make a lattice too fine to convolve: 20,000 seeded resamples instead.
    const fine = Array.from({ length: 200 }, (_, i) => [1 / 7, -2 / 9, 3 / 11, -1 / 13, 0][i % 5]);
    const mean = fine.reduce((a, b) => a + b, 0) / fine.length;
    const [lo, hi] = pairedBootstrapCi95(fine, 3)!;
    expect(pairedBootstrapCi95(fine, 3)).toEqual([lo, hi]);
    expect(lo).toBeLessThan(mean);
    expect(hi).toBeGreaterThan(mean);
    // Within a few hundredths of the normal interval (sd of the mean from the values' own spread).
    const sd = Math.sqrt(fine.reduce((a, v) => a + (v - mean) ** 2, 0) / fine.length / fine.length);
    expect(Math.abs(lo - (mean - 1.96 * sd))).toBeLessThan(0.01);
    expect(Math.abs(hi - (mean + 1.96 * sd))).toBeLessThan(0.01);
    expect(exactBinomialP(0, 0)).toBe(1);
    expect(exactBinomialP(0, 6)).toBeCloseTo(2 / 64, 6);
  });

  it('with repeats: a task scores the mean of its scored repeats (masked left out), and the p is the sign test', () => {
    const a = [row('a', 'x', 'T', 'S', scored(1), 0), row('a', 'x', 'T', 'S', scored(1), 1), row('a', 'y', 'T', 'S', scored(0), 0), row('a', 'y', 'T', 'S', scored(1), 1),
      row('a', 'z', 'T', 'S', scored(0), 0), row('a', 'z', 'T', 'S', masked, 1), row('a', 'w', 'T', 'S', masked, 0)];
    const b = [row('b', 'x', 'T', 'S', scored(1), 0), row('b', 'x', 'T', 'S', scored(0), 1), row('b', 'y', 'T', 'S', scored(1), 0), row('b', 'y', 'T', 'S', scored(1), 1),
      row('b', 'z', 'T', 'S', scored(1), 0), row('b', 'z', 'T', 'S', scored(1), 1), row('b', 'w', 'T', 'S', scored(1), 0)];
    const c = compareRuns({ name: 'a', rows: a }, { name: 'b', rows: b });
    // x: 1 vs 0.5, y: 0.5 vs 1, z: 0 vs 1; w is scored in b only (a's one row is masked).
    expect(c).toMatchObject({ pairs: 3, unpaired: [{ task_id: 'w', scored_in: 'b' }], a_right_b_wrong: 1, a_wrong_b_right: 2, p_method: 'sign_test', mcnemar_p: 1 });
    expect(c.accuracy_a).toBeCloseTo(0.5, 6);
    expect(c.accuracy_b).toBeCloseTo(2.5 / 3, 6);
    expect(c.difference_ci95).toEqual(enumeratedCi([-0.5, 0.5, 1]));
  });

  it('refuses runs of different benchmarks, naming both', () => {
    const other = runB().map((r) => ({ ...r, benchmark: 'babyvision_opencode_question_only' }));
    expect(() => compareRuns({ name: 'A.jsonl', rows: runA() }, { name: 'B.jsonl', rows: other })).toThrow(
      'A.jsonl is a run of babyvision_opencode and B.jsonl of babyvision_opencode_question_only: compare runs of one benchmark',
    );
  });
});

describe('vcfleet compare', () => {
  it('prints the comparison, and --json writes the fields the issue names', async () => {
    const dir = createTmpDir();
    const a = writeRows(path.join(dir, 'A.jsonl'), runA());
    const b = writeRows(path.join(dir, 'B.jsonl'), runB());
    const text = await runCli(['compare', a, b]);
    expect(text.code, text.output).toBe(0);
    expect(text.stdout).toMatch(/^accuracy A \/ B +66\.7% \/ 88\.9%$/m);
    expect(text.stdout).toMatch(/^B - A +\+22\.2 pp {2}95% CI \[/m);
    expect(text.stdout).toMatch(/^flips +A right, B wrong 1; A wrong, B right 3$/m);
    expect(text.stdout).toMatch(/^p +0\.6250 \(McNemar's exact test\)$/m);
    expect(text.stdout).toContain('unpaired (scored on one side only): t9 (A only)');
    expect(text.stdout).toMatch(/^t7 +T2 +S3 +0 +1$/m);
    const json = await runCli(['compare', a, b, '--json']);
    expect(json.code, json.output).toBe(0);
    const body = JSON.parse(json.stdout);
    for (const key of ['pairs', 'unpaired', 'accuracy_a', 'accuracy_b', 'difference', 'difference_ci95', 'a_right_b_wrong', 'a_wrong_b_right', 'mcnemar_p', 'by_type', 'by_subtype']) {
      expect(body, key).toHaveProperty(key);
    }
    expect(body).toMatchObject({ pairs: 9, a_right_b_wrong: 1, a_wrong_b_right: 3, mcnemar_p: 0.625, difference: 0.222222 });
    expect(body.by_type.T2).toMatchObject({ pairs: 3, a_wrong_b_right: 1 });
  });

  it('refuses, in one line naming the file and line, a file that is not a row file and a row of a newer version; and different benchmarks', async () => {
    const dir = createTmpDir();
    const a = writeRows(path.join(dir, 'A.jsonl'), runA());
    const notRows = path.join(dir, 'notes.jsonl');
    writeFileSync(notRows, '{"hello": "world"}\n');
    const bad = await runCli(['compare', a, notRows]);
    expect(bad.code).toBe(2);
    expect(bad.output).toContain(`${notRows} line 1: not a valid row`);
    const newer = writeRows(path.join(dir, 'newer.jsonl'), [runB()[0], { ...runB()[1], row_version: 2 } as unknown as Row]);
    const version = await runCli(['compare', a, newer]);
    expect(version.code).toBe(2);
    expect(version.output).toContain(`${newer} line 2: a row of row version 2, newer than this vcfleet reads (1)`);
    const other = writeRows(path.join(dir, 'Q.jsonl'), runB().map((r) => ({ ...r, benchmark: 'babyvision_opencode_question_only' })));
    const bench = await runCli(['compare', a, other]);
    expect(bench.code).toBe(2);
    expect(bench.output).toContain('is a run of babyvision_opencode and');
    expect(bench.output).toContain('of babyvision_opencode_question_only');
    const missing = await runCli(['compare', a, path.join(dir, 'nope.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.output).toContain('nope.jsonl does not exist');
  });

  it('prints task ids, types and subtypes with terminal escapes escaped (a serve client sets task ids); metrics too', async () => {
    const dir = createTmpDir('vcfleet-compare-escapes-');
    const hostile = 'clear\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\u202eevil';
    const rowsOf = (runId: string, flip: boolean) => [row(runId, `t0${hostile}`, `T${hostile}`, `S${hostile}`, scored(flip ? 0 : 1)), row(runId, 't1', 'T1', 'S1', scored(1))];
    const a = writeRows(path.join(dir, 'a.jsonl'), rowsOf('a', false));
    const b = writeRows(path.join(dir, 'b.jsonl'), rowsOf('b', true));
    const escaped = 'clear\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07\\u202eevil';
    for (const args of [['compare', a, b], ['metrics', b, '--stdout']]) {
      const out = await runCli(args);
      expect(out.code, out.output).toBe(0);
      expect(out.output, args[0]).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]/);
      expect(out.output, args[0]).toContain(`T${escaped}`);
      if (args[0] === 'compare') expect(out.output).toContain(`t0${escaped}`);
    }
  });
});
