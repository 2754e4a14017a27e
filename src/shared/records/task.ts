/**
 * A prepared task: one BabyVision puzzle with the prompt of one benchmark variant, as written by
 * `vcfleet prepare` to `<data_dir>/<benchmark>/tasks.jsonl`. Images live beside it, once each, as
 * `images/<sha256>.<png|jpg>`.
 */
import { z } from 'zod';

export const AnsTypeSchema = z.enum(['choice', 'blank']);

export const PreparedTaskSchema = z.object({
  task_id: z.string().min(1),
  benchmark: z.string(),
  /** The full user prompt for this benchmark variant (instruction, question, options). */
  prompt: z.string(),
  /** The question with its options as `(A) ...` lines: what the judge sees. */
  question: z.string(),
  /** Gold answer: a letter for `choice`, the `blankAns` string for `blank`. */
  gold: z.string(),
  type: z.string(),
  subtype: z.string(),
  ans_type: AnsTypeSchema,
  options: z.array(z.string()).default([]),
  image_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** PNG or JPEG for a prepared task; WebP too for one a `vcfleet serve` request gave. */
  image_mime: z.enum(['image/png', 'image/jpeg', 'image/webp']),
  /** Path of the image relative to the benchmark folder. */
  image_file: z.string(),
});
export type PreparedTask = z.infer<typeof PreparedTaskSchema>;

/** The manifest written last by `prepare`; its presence marks a complete preparation. */
export const ManifestSchema = z.object({
  version: z.literal(1),
  benchmark: z.string(),
  source_sha256: z.string(),
  source_path: z.string(),
  num_tasks: z.number().int(),
  num_images: z.number().int(),
  prepared_at: z.string(),
});
export type Manifest = z.infer<typeof ManifestSchema>;

export type TaskImageMime = PreparedTask['image_mime'];

export function imageExtension(mime: TaskImageMime): 'png' | 'jpg' | 'webp' {
  return mime === 'image/png' ? 'png' : mime === 'image/webp' ? 'webp' : 'jpg';
}
