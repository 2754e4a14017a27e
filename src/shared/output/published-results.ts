/**
 * Published BabyVision results to print beside a run's paper table: `configs/published_results.yaml`
 * (the paper's rows), or the file `report.published_results` names (a user's own copy, extended).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';

export const DEFAULT_PUBLISHED_RESULTS = fileURLToPath(new URL('../../../configs/published_results.yaml', import.meta.url));

const percent = z.number().min(0).max(100);

export const PublishedRowSchema = z
  .object({
    /** Who or what was measured (`Human adults`, a model name). */
    name: z.string().min(1),
    /** Overall accuracy, percent. */
    overall: percent,
    /** Accuracy per type, percent (optional). */
    by_type: z.record(z.string(), percent).optional(),
  })
  .strict();
export type PublishedRow = z.infer<typeof PublishedRowSchema>;

const PublishedFileSchema = z.object({ rows: z.array(PublishedRowSchema) }).strict();

/** The published rows of `file` (default: the shipped copy). A bad file is a ConfigError naming it and the key. */
export function readPublishedResults(file: string | null = null): PublishedRow[] {
  const path = file ?? DEFAULT_PUBLISHED_RESULTS;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read published results ${path} (report.published_results): ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = YAML.parse(text);
  } catch (err) {
    throw new ConfigError(`${path} (report.published_results) is not YAML: ${(err as Error).message}`);
  }
  const parsed = PublishedFileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`${path} (report.published_results): ${issue.path.join('.') || 'the file'}: ${issue.message}; each row is {name, overall, by_type?} in percent`);
  }
  return parsed.data.rows;
}

/** The published rows as lines of label and value (`49.7`), under a heading. */
export function publishedLines(rows: readonly PublishedRow[]): Array<[string, string]> {
  if (rows.length === 0) return [];
  return [['published (paper)', ''], ...rows.map((r): [string, string] => [`  ${r.name}`, r.overall.toFixed(1)])];
}
