/**
 * What the fleet benchmarks share: a config for a unique key prefix on the bench Redis, synthetic
 * prepared tasks with one small shared image, a logger that discards its lines (they are still
 * serialised, as in production), and the no-op judge.
 */
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/shared/config/load.ts';
import type { Judge } from '../../src/shared/ports/judge.ts';
import { createLogger, type Logger } from '../../src/shared/logger.ts';
import type { PreparedTask } from '../../src/shared/records/task.ts';
import { encodePng } from '../../src/demo/png.ts';

export interface BenchConfigInput {
  redisUrl: string;
  /** Folder for the output JSONL and any state. */
  dir: string;
  overrides?: string[];
}

export function benchPrefix(name: string): string {
  return `bench-${name}-${randomBytes(3).toString('hex')}`;
}

/** A config as a user would load it, pointed at the bench Redis and a unique prefix. */
export function benchConfig(input: BenchConfigInput, prefix: string): Config {
  return loadConfig({
    env: {},
    overrides: [
      `++redis_url=${input.redisUrl}`,
      `++queues.prefix=${prefix}`,
      `++output_jsonl_fpath=${path.join(input.dir, `${prefix}.jsonl`)}`,
      `++data_dir=${path.join(input.dir, 'data')}`,
      `++state_dir=${path.join(input.dir, 'state')}`,
      '++agent.kind=scripted',
      // The no-op judge needs no rate limit; the default (10/s) would be the whole measurement.
      '++judge.rate_limit_per_s=1000000',
      ...(input.overrides ?? []),
    ],
  });
}

/** A logger at `level` whose lines are built and then dropped. */
export function discardLogger(level = 'info'): Logger {
  // BENCH_LOG=warn shows the fleet's warnings and errors on stderr instead (for debugging a benchmark).
  if (process.env.BENCH_LOG) return createLogger({ level: process.env.BENCH_LOG, destination: process.stderr as never });
  return createLogger({ level, destination: { write: () => true } as never });
}

export const BENCH_IMAGE = Buffer.from(encodePng(16, 16, (x, y) => [(x * 16) % 256, (y * 16) % 256, 128]));
const IMAGE_SHA = createHash('sha256').update(BENCH_IMAGE).digest('hex');

/** `count` BabyVision-shaped tasks (prompt of about 600 characters), all with the same small image. */
export function syntheticTasks(count: number): PreparedTask[] {
  return Array.from({ length: count }, (_, i): PreparedTask => {
    const id = `bv-${String(i + 1).padStart(4, '0')}`;
    const question = `Puzzle ${i + 1}: which option matches the highlighted region of the picture?`;
    const options = ['red square', 'blue circle', 'green star', 'yellow line'];
    return {
      task_id: id,
      benchmark: 'babyvision_opencode',
      prompt: `${'You are given a visual puzzle. Look carefully at the image and reason step by step. '.repeat(5)}\n${question}\n${options.map((o, k) => `(${String.fromCharCode(65 + k)}) ${o}`).join('\n')}\nGive the final answer as \\boxed{X}.`,
      question: `${question}\n${options.map((o, k) => `(${String.fromCharCode(65 + k)}) ${o}`).join('\n')}`,
      gold: String.fromCharCode(65 + (i % 4)),
      type: ['Fine-grained Discrimination', 'Visual Tracking', 'Spatial Perception', 'Visual Pattern Recognition'][i % 4],
      subtype: `subtype-${i % 9}`,
      ans_type: 'choice',
      options,
      image_sha256: IMAGE_SHA,
      image_mime: 'image/png',
      image_file: `images/${IMAGE_SHA}.png`,
    };
  });
}

export const readBenchImage = async (): Promise<Buffer> => BENCH_IMAGE;

export const noopJudge: Judge = {
  modelName: 'noop-judge',
  grade: async () => ({ status: 'scored', verdict: 'equivalent', reason: '', reward: 1, cached: false }),
  close: async () => {},
};

/** A promise with its resolve, for "wait until the n-th event". */
export function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Delete every key of `prefix` (only the bench's own: prefixes are unique). */
export { deletePrefix } from '../../test/helpers/redis-keys.ts';
