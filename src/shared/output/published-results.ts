/**
 * Published BabyVision results to print beside a run's paper table: `configs/published_results.yaml`
 * (the paper's rows), or the file `report.published_results` names (a user's own copy, extended).
 * Rows are of two kinds, printed in blocks of their own: the paper's (no tools: the model answers
 * from the image), and tool-augmented results (`kind: tool_augmented`: the model runs code, as in
 * this fleet), each with its pass count, step budget and source, since they are not comparable with
 * the no-tool rows without them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../errors.ts';

export const DEFAULT_PUBLISHED_RESULTS = fileURLToPath(new URL('../../../configs/published_results.yaml', import.meta.url));

const percent = z.number().min(0).max(100);

const NoToolRowSchema = z
  .object({
    /** `no_tool` (the default): the paper's setting, the model answers from the image alone. */
    kind: z.literal('no_tool').default('no_tool'),
    /** Who or what was measured (`Human adults`, a model name). */
    name: z.string().min(1),
    /** Overall accuracy, percent. */
    overall: percent,
    /** Accuracy per type, percent (optional). */
    by_type: z.record(z.string(), percent).optional(),
  })
  .strict();

const ToolRowSchema = z
  .object({
    /** The model runs code (a sandbox, tools), as this fleet's own setting. */
    kind: z.literal('tool_augmented'),
    name: z.string().min(1),
    overall: percent,
    by_type: z.record(z.string(), percent).optional(),
    /** Passes the figure is over (repeats of every task). */
    passes: z.number().int().min(1),
    /** Steps (tool calls or turns) each rollout may take. */
    step_budget: z.number().int().min(1),
    /** Where the figure comes from (a paper, a URL, your own run id). */
    source: z.string().min(1),
  })
  .strict();

export const PublishedRowSchema = z.discriminatedUnion('kind', [NoToolRowSchema, ToolRowSchema]);
export type PublishedRow = z.infer<typeof PublishedRowSchema>;

/** A row without `kind` is one of the paper's (no tools). */
const withKind = (row: unknown) => (row && typeof row === 'object' && !Array.isArray(row) && !('kind' in row) ? { ...row, kind: 'no_tool' } : row);
const PublishedFileSchema = z.object({ rows: z.array(z.preprocess(withKind, PublishedRowSchema)) }).strict();

const SHAPES = 'a row is {name, overall, by_type?} in percent (the paper\'s, no tools), or {kind: tool_augmented, name, overall, passes, step_budget, source, by_type?}';

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
    throw new ConfigError(`${path} (report.published_results): ${issue.path.join('.') || 'the file'}: ${issue.message}; ${SHAPES}`);
  }
  return parsed.data.rows;
}

/** The published rows as lines of label and value (`49.7`), each kind under its own heading. */
export function publishedLines(rows: readonly PublishedRow[]): Array<[string, string]> {
  const plain = rows.filter((r) => r.kind !== 'tool_augmented');
  const tools = rows.filter((r) => r.kind === 'tool_augmented');
  return [
    ...(plain.length ? [['published (paper, no tools)', ''] as [string, string], ...plain.map((r): [string, string] => [`  ${r.name}`, r.overall.toFixed(1)])] : []),
    ...(tools.length
      ? [['published (tool-augmented: the model runs code)', ''] as [string, string],
        ...tools.map((r): [string, string] => [`  ${r.name}`, `${r.overall.toFixed(1)}  (${r.passes} pass${r.passes === 1 ? '' : 'es'}, ${r.step_budget} steps; ${r.source})`])]
      : []),
  ];
}
