/**
 * The summary of one rollout: the agent's stop reason and answer, the end of its text (all the judge
 * sees), its counts and costs. It travels in judge jobs, is kept per run for rejudging, and fills a
 * row's agent fields.
 */
import { z } from 'zod';
import { STOP_REASONS } from './agent.ts';
import { MAX_ANSWER_CHARS } from './answer.ts';

/** What a rollout produced, as the judge and the rows need it (also kept per run for rejudging). */
export const RolloutSummarySchema = z.object({
  stop_reason: z.enum(STOP_REASONS),
  extracted_answer: z.string().max(MAX_ANSWER_CHARS).nullable(),
  /** The end of the model's text (at most 4000 characters: all the judge sees). */
  response_tail: z.string(),
  turns: z.number().int().min(0),
  tool_calls: z.number().int().min(0),
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  wall_s: z.number().min(0),
  error: z.string().nullable().default(null),
  limit_hits: z.record(z.string(), z.number().int().min(0)).default({}),
  refused_requests: z.record(z.string(), z.number().int().min(0)).default({}),
  /** Chat calls that were not the agent's own conversation (made by something the model ran). */
  forged_calls: z.number().int().min(0).default(0),
});
export type RolloutSummary = z.infer<typeof RolloutSummarySchema>;
