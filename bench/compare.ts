/**
 * How long `vcfleet compare`'s figures take on BabyVision-sized runs: 388 tasks, 1, 3 and 8 repeats a
 * side, about 3% of rows masked (so tasks have uneven numbers of scored repeats), seeded. The exact
 * bootstrap serves 1 and 3 repeats; 8 repeats make the lattice too fine and the interval is resampled.
 *
 *   node bin/run-ts.js bench/compare.ts
 */
import { compareRuns, type CompareRow } from '../src/shared/output/compare-runs.ts';
import { seededRandom } from '../src/shared/output/paired-stats.ts';

const TYPES = ['Fine-grained Discrimination', 'Visual Tracking', 'Spatial Perception', 'Visual Pattern Recognition'];
const random = seededRandom(7);

function run(id: string, accuracy: number, repeats: number): CompareRow[] {
  const rows: CompareRow[] = [];
  for (let t = 0; t < 388; t++) {
    for (let r = 0; r < repeats; r++) {
      const masked = random() < 0.03;
      rows.push({
        run_id: id, rollout_id: `${id}-${t}-${r}`, task_id: `t${t}`, benchmark: 'babyvision_opencode', type: TYPES[t % 4], subtype: `s${t % 22}`,
        reward: masked ? null : random() < accuracy ? 1 : 0, failure_kind: masked ? 'judge_failed' : null,
      });
    }
  }
  return rows;
}

for (const repeats of [1, 3, 8]) {
  const a = run('a', 0.3, repeats);
  const b = run('b', 0.35, repeats);
  const times: number[] = [];
  let line = '';
  for (let round = 0; round < 3; round++) {
    const started = performance.now();
    const c = compareRuns({ name: 'a', rows: a }, { name: 'b', rows: b });
    times.push(performance.now() - started);
    line = `B - A ${c.difference}, 95% CI [${c.difference_ci95}], p ${c.mcnemar_p} (${c.p_method})`;
  }
  times.sort((x, y) => x - y);
  process.stdout.write(`388 tasks x ${repeats} repeat(s) a side: median ${times[1].toFixed(0)} ms of 3; ${line}\n`);
}
