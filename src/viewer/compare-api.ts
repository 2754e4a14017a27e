/**
 * The compare page's data: two runs of the source, paired by task (src/shared/output/compare-runs.ts),
 * with each run's meta so the page can name them and link their rollouts.
 */
import { DataError } from '../shared/errors.ts';
import { compareRuns, type Comparison } from '../shared/output/compare-runs.ts';
import type { RunMeta, ViewerSource } from './source.ts';

export interface ComparePayload {
  comparison: Comparison;
  a: RunMeta;
  b: RunMeta;
}

/** The comparison of run `b` against run `a`; a DataError names a run the source lacks, or two benchmarks. */
export async function comparePayload(source: ViewerSource, a: string, b: string): Promise<ComparePayload> {
  if (!a || !b) throw new DataError('choose two runs: /compare?a=RUN&b=RUN');
  const [runA, runB] = await Promise.all([source.run(a), source.run(b)]);
  if (!runA) throw new DataError(`no run "${a}" here`);
  if (!runB) throw new DataError(`no run "${b}" here`);
  const comparison = compareRuns({ name: `run ${a}`, rows: runA.rows }, { name: `run ${b}`, rows: runB.rows });
  return { comparison, a: runA.meta, b: runB.meta };
}
