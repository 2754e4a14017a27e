/**
 * One judge request with its retries: the openai client's own retries are off, so every attempt,
 * wait and final failure is decided here and logged.
 */
import OpenAI from 'openai';
import type { Config } from '../../shared/config.ts';
import { rewardFor, type JudgeOutcome } from '../../shared/judge.ts';
import type { Logger } from '../../shared/logger.ts';
import { backoffMs, sleep } from './backoff.ts';
import { classifyCallError, type CallFailure } from './call-errors.ts';
import type { JudgePrompt } from './prompt.ts';
import { parseVerdict } from './verdict.ts';

/** What one judge call needs; built once by createJudge. */
export interface JudgeCallContext {
  client: OpenAI;
  model: string;
  settings: Config['judge'];
  log: Logger;
  /** Removes secrets from text that may end up in logs or rows. */
  clean: (text: string) => string;
  /** Jitter source in [0, 1). */
  random?: () => number;
}

export type CallResult = { ok: true; text: string } | { ok: false; failure: CallFailure };

const ABORTED: CallResult = { ok: false, failure: { kind: 'aborted', retryable: false, message: 'aborted' } };

/** One chat-completions request; never throws. */
export async function callOnce(ctx: JudgeCallContext, prompt: JudgePrompt, attempt: number, signal?: AbortSignal): Promise<CallResult> {
  const started = performance.now();
  const latency = (): number => Math.round(performance.now() - started);
  try {
    const completion = await ctx.client.chat.completions.create(
      {
        model: ctx.model,
        messages: [
          { role: 'system', content: prompt.system },
          { role: 'user', content: prompt.user },
        ],
        temperature: ctx.settings.temperature,
        max_tokens: ctx.settings.max_tokens,
      },
      { signal },
    );
    ctx.log.info({ event: 'judge_call', status: 'ok', attempt, latency_ms: latency() }, 'judge call answered');
    return { ok: true, text: completion.choices?.[0]?.message?.content ?? '' };
  } catch (err) {
    if (signal?.aborted) return ABORTED;
    const failure = classifyCallError(err);
    failure.message = ctx.clean(failure.message);
    ctx.log.warn(
      {
        event: 'judge_call', status: 'error', attempt, latency_ms: latency(),
        kind: failure.kind, http_status: failure.httpStatus, retryable: failure.retryable,
      },
      `judge call failed: ${failure.message}`,
    );
    return { ok: false, failure };
  }
}

/**
 * Up to `1 + judge.max_retries` attempts. Between attempts it waits what the server asked for
 * (Retry-After, at most 60 s) or else backoffMs(); an abort ends the wait at once.
 */
export async function callWithRetries(ctx: JudgeCallContext, prompt: JudgePrompt, signal?: AbortSignal): Promise<CallResult> {
  const attempts = ctx.settings.max_retries + 1;
  for (let attempt = 1; ; attempt++) {
    const result = await callOnce(ctx, prompt, attempt, signal);
    if (result.ok || !result.failure.retryable || attempt >= attempts) return result;
    const waitMs =
      result.failure.retryAfterMs ??
      backoffMs(attempt - 1, { baseMs: ctx.settings.backoff_base_ms, maxMs: ctx.settings.backoff_max_ms, random: ctx.random });
    ctx.log.debug({ event: 'judge_retry_wait', attempt, wait_ms: waitMs }, 'waiting before the next judge call');
    if (!(await sleep(waitMs, signal))) return ABORTED;
  }
}

/** Turn a call result into an outcome: a scored verdict, or a failure with its reason. */
export function toOutcome(result: CallResult, maxAttempts: number, clean: (s: string) => string = (s) => s): JudgeOutcome {
  if (!result.ok) {
    const { failure } = result;
    if (failure.kind === 'aborted') return { status: 'failed', reason: 'aborted' };
    const when = failure.retryable ? `after ${maxAttempts} attempt(s)` : '(not retryable)';
    return { status: 'failed', reason: `judge call failed ${when}: ${failure.message}` };
  }
  const parsed = parseVerdict(result.text);
  if (!parsed.ok) return { status: 'failed', reason: clean(parsed.reason) };
  return { status: 'scored', verdict: parsed.verdict, reason: clean(parsed.reason), reward: rewardFor(parsed.verdict), cached: false };
}
