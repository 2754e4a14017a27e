/**
 * One judge request, retries included: one attempt at a time through the openai client, retried by
 * withRetries (judge-client.ts); every attempt goes through a fetch that logs it and caps Retry-After
 * (attempt-fetch.ts), and the result becomes an outcome here.
 */
import type OpenAI from 'openai';
import type { Config } from '../../shared/config/load.ts';
import type { JudgeResult } from '../../shared/ports/judge.ts';
import { rewardFor, VERDICTS, type JudgeUsage } from '../../shared/scoring/verdict.ts';
import type { Logger } from '../../shared/logger.ts';
import { createAttemptFetch, type Fetch } from './attempt-fetch.ts';
import { withRetries } from './judge-client.ts';
import { describeCallError, isContentRefusal, type CallFailure } from './call-errors.ts';
import type { JudgePrompt } from './prompt.ts';
import { parseVerdict } from './verdict.ts';

/** What one judge call needs; built once by createJudge, its `log` narrowed per grade. */
export interface JudgeCallContext {
  model: string;
  /** The judge endpoint without credentials (part of a cached verdict's key). */
  endpoint: string;
  settings: Config['judge'];
  log: Logger;
  /** Removes secrets from text that may end up in logs or rows. */
  clean: (text: string) => string;
  /** A client that sends every attempt through `fetch` (one per call: withRetries retries). */
  newClient: (fetch: Fetch) => OpenAI;
  /** Jitter source in [0, 1) for the retry backoff; default Math.random. */
  random?: () => number;
  /** Sends each attempt, under the attempt logging; default the global fetch. */
  fetch?: Fetch;
  /** Longest Retry-After honoured, in milliseconds. */
  retryAfterCapMs: number;
  /** Set once the endpoint refused `response_format`: this process asks without it from then on (shared by every grade). */
  structured?: { refused: boolean };
}

/** The verdict as structured output: the reply is one object with `verdict` (one of VERDICTS) and `reason`. */
const VERDICT_FORMAT: OpenAI.ResponseFormatJSONSchema = {
  type: 'json_schema',
  json_schema: {
    name: 'verdict',
    strict: true,
    schema: {
      type: 'object',
      properties: { verdict: { type: 'string', enum: [...VERDICTS] }, reason: { type: 'string' } },
      required: ['verdict', 'reason'],
      additionalProperties: false,
    },
  },
};

/** An endpoint's refusal of the structured-output field itself (not of the grading input). */
const refusesFormat = (f: CallFailure) => f.kind === 'http' && [400, 422].includes(f.status ?? 0) && /response_format|json_schema|structured|guided/i.test(f.message);

/** `attempts`: requests sent, retries included; `usage`: the tokens the judge's reply says it counted (0 when it says none). */
export type CallResult =
  | { ok: true; text: string; finishReason: string | null; attempts: number; usage: JudgeUsage; servedModel: string | null }
  | { ok: false; failure: CallFailure; attempts: number };

/** A token count as the judge's reply gives it: a whole number of at least 0, else 0. */
const tokens = (n: unknown): number => (typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : 0);

/**
 * One chat-completions request with its retries; never throws. An abort ends it at once, and nothing is
 * sent after. With `judge.structured_output` it asks for the verdict's schema; an endpoint that refuses
 * the field is asked again without it (once, then never by this process).
 */
export async function callJudge(ctx: JudgeCallContext, prompt: JudgePrompt, signal?: AbortSignal): Promise<CallResult> {
  const structured = ctx.settings.structured_output && !ctx.structured?.refused;
  const result = await callOnce(ctx, prompt, structured, signal);
  if (!structured || result.ok || !refusesFormat(result.failure)) return result;
  if (ctx.structured) ctx.structured.refused = true;
  ctx.log.warn({ event: 'judge_structured_output_refused', err: result.failure.message }, 'the judge endpoint refused structured output; asking without it');
  const again = await callOnce(ctx, prompt, false, signal);
  return { ...again, attempts: again.attempts + result.attempts };
}

async function callOnce(ctx: JudgeCallContext, prompt: JudgePrompt, structured: boolean, signal?: AbortSignal): Promise<CallResult> {
  const sent = createAttemptFetch({ fetch: ctx.fetch, log: ctx.log, clean: ctx.clean, signal, retryAfterCapMs: ctx.retryAfterCapMs });
  const aborted = (): CallResult => ({ ok: false, failure: { kind: 'aborted', message: 'aborted' }, attempts: sent.attempts });
  const client = ctx.newClient(sent.fetch);
  const { settings } = ctx;
  const backoff = { baseMs: settings.backoff_base_ms, maxMs: settings.backoff_max_ms, random: ctx.random };
  const retries = { retries: settings.max_retries, backoff, retryAfterCapMs: ctx.retryAfterCapMs, signal };
  try {
    const completion = await withRetries(() => client.chat.completions.create(
      {
        model: ctx.model,
        messages: [
          { role: 'system', content: prompt.system },
          { role: 'user', content: prompt.user },
        ],
        temperature: settings.temperature,
        top_p: 1,
        max_tokens: settings.max_tokens,
        ...(structured ? { response_format: VERDICT_FORMAT } : {}),
      },
      { signal },
    ), retries);
    const choice = completion.choices?.[0];
    const usage = { input_tokens: tokens(completion.usage?.prompt_tokens), output_tokens: tokens(completion.usage?.completion_tokens) };
    // The model as the judge server reports it (a local server may serve another than the one asked for).
    const servedModel = typeof completion.model === 'string' && completion.model.trim() !== '' ? ctx.clean(completion.model.trim().slice(0, 200)) : null;
    return { ok: true, text: choice?.message?.content ?? '', finishReason: choice?.finish_reason ?? null, attempts: sent.attempts, usage, servedModel };
  } catch (err) {
    if (signal?.aborted) return aborted();
    const failure = describeCallError(err);
    return { ok: false, failure: { ...failure, message: ctx.clean(failure.message) }, attempts: sent.attempts };
  }
}

/**
 * Turn a call result into an outcome: a scored verdict; a refusal the grading input itself caused (its
 * context length, a content filter: the rollout scores 0); or a failure naming its attempts and last
 * error (`unavailable`), or the reply that held no verdict (`no_verdict`).
 */
export function toJudgeResult(result: CallResult, maxAttempts: number, clean: (s: string) => string = (s) => s): JudgeResult {
  if (!result.ok) {
    const { failure, attempts } = result;
    if (failure.kind === 'aborted') return { status: 'failed', reason: 'aborted', kind: 'unavailable' };
    if (isContentRefusal(failure)) return { status: 'refused', reason: `the judge refused the grading input: ${failure.message}` };
    // Attempts to spare mean the error was judged final (a 4xx other than 408/409/429, say).
    const when = attempts < maxAttempts ? '(not retryable)' : `after ${attempts} attempt(s)`;
    return { status: 'failed', reason: `judge call failed ${when}: ${failure.message}`, kind: 'unavailable' };
  }
  if (result.finishReason === 'content_filter') return { status: 'refused', reason: "the judge's content filter stopped its reply to the grading input" };
  // A reply cut at max_tokens is no verdict, whatever its start says (the reference would score it 0).
  if (result.finishReason === 'length') return { status: 'failed', reason: clean(`the judge's reply was cut at its max_tokens before it ended: "${result.text.slice(0, 200)}"`), kind: 'no_verdict' };
  const parsed = parseVerdict(result.text);
  if (!parsed.ok) return { status: 'failed', reason: clean(parsed.reason), kind: 'no_verdict' };
  return { status: 'scored', verdict: parsed.verdict, reason: clean(parsed.reason), reward: rewardFor(parsed.verdict), cached: false };
}
