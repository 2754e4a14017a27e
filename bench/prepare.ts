/**
 * Benchmark 5, prepare: time and peak memory of `prepareBenchmark` on a BabyVision-sized parquet
 * (388 rows, each a random-noise PNG of ~130 KB, about 51 MB; BabyVision-shaped columns, row groups
 * of 100 rows as Hugging Face `datasets` writes image data), in a child process whose peak RSS (VmHWM) is
 * compared with the file size. A second child loads the same modules and prepares nothing: its
 * peak is the baseline of Node, tsx and the modules.
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import { encodePng } from '../src/demo/png.ts';
import { writeFixtureParquet } from '../test/helpers/fixture-parquet.ts';
import type { PrepareSample } from './children/prepare-child.ts';
import { forkTs } from './lib/child.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, mib, seededRandom } from './lib/stats.ts';

export interface PrepareBenchOptions {
  dir: string;
  /** Rows of the parquet. Default 388. */
  rows: number;
  /** Size of each image in KB. Default 130. */
  imageKb: number;
  log?: (line: string) => void;
}

/** A PNG of random noise (incompressible), about `kb` KB. */
function noisePng(kb: number, seed: number): Uint8Array {
  const side = Math.round(Math.sqrt((kb * 1024) / 3));
  const rand = seededRandom(seed);
  return encodePng(side, side, () => [Math.floor(rand() * 256), Math.floor(rand() * 256), Math.floor(rand() * 256)]);
}

async function runChild(args: string[]): Promise<PrepareSample> {
  const child = forkTs<PrepareSample>('bench/children/prepare-child.ts', args);
  const sample = await child.next(() => true);
  const code = await child.exited;
  if (code !== 0) throw new Error(`prepare child ${args[0]} exited with ${code}`);
  return sample;
}

function writeParquet(file: string, opts: PrepareBenchOptions, rowGroupSize: number): number {
  writeFixtureParquet(file, {
    rows: opts.rows,
    rowGroupSize,
    mutate: (rows) => rows.map((r, i) => ({ ...r, image: { bytes: noisePng(opts.imageKb, i + 1), path: `img_${i}.png` } })),
  });
  return statSync(file).size;
}

/**
 * VmHWM belongs to the process image; maxRSS (getrusage) may carry the parent's RSS across the
 * fork + exec that started the child, so it is only the fallback.
 */
const peakOf = (s: PrepareSample) => (Number.isFinite(s.vmHwm) ? s.vmHwm : s.maxRss);

export async function benchPrepare(opts: PrepareBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const file = path.join(opts.dir, 'babyvision-sized.parquet');
  const size = writeParquet(file, opts, 100);
  log(`  parquet: ${opts.rows} rows, ${mib(size)}`);
  const baseline = await runChild(['baseline']);
  const run = await runChild(['prepare', file, path.join(opts.dir, 'prepare-data')]);
  if (run.tasks !== opts.rows) throw new Error(`prepare made ${run.tasks} tasks of ${opts.rows} rows`);
  const peak = peakOf(run);
  const base = peakOf(baseline);
  // The same rows in one row group: memory follows the row group, not the file.
  const single = path.join(opts.dir, 'babyvision-one-group.parquet');
  const singleSize = writeParquet(single, opts, opts.rows);
  const one = await runChild(['prepare', single, path.join(opts.dir, 'prepare-data-one')]);
  return [
    {
      bench: '5 prepare', metric: 'peak RSS / parquet file size', value: fmt(peak / size),
      note: `peak RSS ${mib(peak)} for a ${mib(size)} file of ${opts.rows} rows (~${opts.imageKb} KB noise PNGs, row groups of 100); ${fmt((peak - base) / size)} above the ${mib(base)} of Node, tsx and the modules alone`,
    },
    {
      bench: '5 prepare', metric: 'peak RSS / file size, the same rows in one row group', value: fmt(peakOf(one) / singleSize),
      note: `peak RSS ${mib(peakOf(one))}, ${fmt((peakOf(one) - base) / singleSize)} above the baseline: hyparquet reads a whole row group at once, so memory follows the largest row group`,
    },
    { bench: '5 prepare', metric: 'prepare time', value: `${fmt(run.seconds, 1)} s`, note: `${fmt(size / 2 ** 20 / run.seconds, 1)} MiB/s: hash, read row group by row group, write tasks.jsonl and ${opts.rows} images` },
  ];
}
