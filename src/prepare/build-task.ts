/** Turn a checked BabyVision row into the PreparedTask of one benchmark variant (pure). */
import type { BenchmarkName } from '../shared/config/load.ts';
import { imageExtension, type PreparedTask } from '../shared/records/task.ts';
import type { BabyVisionRow } from './babyvision-row.ts';
import { sha256Bytes } from './hash.ts';
import { buildPrompt, formatQuestion } from './prompts.ts';

/** Path of an image relative to the benchmark folder: content-addressed by its SHA-256. */
export function imageFileName(sha256: string, mime: BabyVisionRow['imageMime']): string {
  return `images/${sha256}.${imageExtension(mime)}`;
}

export function buildPreparedTask(row: BabyVisionRow, benchmark: BenchmarkName): PreparedTask {
  const question = formatQuestion(row.question, row.options);
  const sha = sha256Bytes(row.image);
  return {
    task_id: row.taskId,
    benchmark,
    prompt: buildPrompt(benchmark, question, row.ansType),
    question,
    gold: row.gold,
    type: row.type,
    subtype: row.subtype,
    ans_type: row.ansType,
    options: row.options,
    image_sha256: sha,
    image_mime: row.imageMime,
    image_file: imageFileName(sha, row.imageMime),
  };
}
