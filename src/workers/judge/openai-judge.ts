/**
 * The real Judge: an OpenAI-compatible chat-completions endpoint, verdicts cached by what makes them
 * (judge-cache.ts) when the run's `judge.cache` says so. Endpoint failures and replies without a valid verdict come back as `{ status: 'failed' }`.
 */
import type { Config } from '../../shared/config/load.ts';
import { ConfigError } from '../../shared/errors.ts';
import type { Judge, JudgeInput, JudgeResult } from '../../shared/ports/judge.ts';
import { rewardFor } from '../../shared/scoring/verdict.ts';
import { scrub, type Logger } from '../../shared/logger.ts';
import type { Fetch } from './attempt-fetch.ts';
import { RETRY_AFTER_CAP_MS } from '../../pacing/index.ts';
import { createJudgeClient } from './judge-client.ts';
import { callJudge, toJudgeResult, type CallResult, type JudgeCallContext } from './judge-call.ts';
import { judgeCacheKey, type JudgeCache } from './judge-cache.ts';
import { buildJudgePrompt, JUDGE_PROMPT_VERSION } from './prompt.ts';
import { stripCredentials } from '../../shared/config/run-settings.ts';

/** Sent as the API key to endpoints other than api.openai.com when `judge.api_key` is unset. */
export const PLACEHOLDER_API_KEY = 'none';

export interface CreateJudgeOptions {
  /** The resolved config: `visual_coding_opencode_judge_base_url`, `..._model_name` and `judge.*`. */
  config: Config;
  /** Receives one line per call attempt and per outcome; the API key is never given to it. */
  logger: Logger;
  /** Verdict cache; used when given and the run's `judge.cache` (else this config's) is true. Default: none. */
  cache?: JudgeCache;
  /** fetch implementation for the openai client; default the global fetch. */
  fetch?: Fetch;
  /** Jitter source in [0, 1) for the retry backoff; default Math.random. */
  random?: () => number;
  /** Longest wait a server's Retry-After can impose, in milliseconds; default RETRY_AFTER_CAP_MS (60 s). */
  retryAfterCapMs?: number;
}

/**
 * The API key to send: `judge.api_key`, else a placeholder for self-hosted endpoints. Throws
 * ConfigError when the key is unset and the endpoint is api.openai.com.
 */
export function resolveJudgeApiKey(config: Config): string {
  if (config.judge.api_key) return config.judge.api_key;
  const host = new URL(config.visual_coding_opencode_judge_base_url).hostname.toLowerCase();
  if (host === 'api.openai.com') {
    throw new ConfigError(
      'the judge endpoint is api.openai.com but no judge API key is set: set OPENAI_API_KEY ' +
        '(config key judge.api_key), or point visual_coding_opencode_judge_base_url at another endpoint',
    );
  }
  return PLACEHOLDER_API_KEY;
}

function createContext(options: CreateJudgeOptions, apiKey: string): JudgeCallContext {
  const { config } = options;
  const model = config.visual_coding_opencode_judge_model_name;
  return {
    model,
    endpoint: stripCredentials(config.visual_coding_opencode_judge_base_url),
    settings: config.judge,
    log: options.logger.child({ component: 'judge', judge_model: model }),
    clean: (text) => scrub(text, [apiKey]),
    newClient: (fetch) => createJudgeClient(config, apiKey, fetch),
    random: options.random,
    fetch: options.fetch,
    retryAfterCapMs: options.retryAfterCapMs ?? RETRY_AFTER_CAP_MS,
    structured: { refused: false },
  };
}

async function readCache(ctx: JudgeCallContext, cache: JudgeCache | undefined, key: string): Promise<JudgeResult | null> {
  if (!cache) return null;
  try {
    const hit = await cache.get(key);
    return hit && { status: 'scored', verdict: hit.verdict, reason: hit.reason, reward: rewardFor(hit.verdict), cached: true, ...(hit.model ? { servedModel: hit.model } : {}) };
  } catch (err) {
    ctx.log.warn({ event: 'judge_cache_error', op: 'get', err: ctx.clean(String(err)) }, 'judge cache read failed; calling the judge');
    return null;
  }
}

async function writeCache(ctx: JudgeCallContext, cache: JudgeCache | undefined, key: string, outcome: JudgeResult): Promise<void> {
  if (!cache || outcome.status !== 'scored') return; // failures are never cached: they must stay rejudgeable
  try {
    await cache.set(key, { verdict: outcome.verdict, reason: outcome.reason, ...(outcome.servedModel ? { model: outcome.servedModel } : {}) });
  } catch (err) {
    ctx.log.warn({ event: 'judge_cache_error', op: 'set', err: ctx.clean(String(err)) }, 'judge cache write failed');
  }
}

/** The call context of one grading: the run's judge model and settings, the rollout id on every log line. */
function forInput(ctx: JudgeCallContext, input: JudgeInput): JudgeCallContext {
  const run = input.run;
  if (!run) return { ...ctx, log: ctx.log.child({ rollout_id: input.rolloutId }) };
  const model = run.visual_coding_opencode_judge_model_name;
  return {
    ...ctx,
    model,
    settings: { ...ctx.settings, ...run.judge },
    log: ctx.log.child({ rollout_id: input.rolloutId, ...(model === ctx.model ? {} : { judge_model: model }) }),
  };
}

/**
 * Grade one answer: cache, else the endpoint with retries. Never throws for endpoint failures.
 * Every line it logs carries the rollout id (`rollout_id`) when the input has one.
 */
export async function gradeWith(judgeCtx: JudgeCallContext, cache: JudgeCache | undefined, input: JudgeInput, signal?: AbortSignal): Promise<JudgeResult> {
  if (signal?.aborted) return { status: 'failed', reason: 'aborted', kind: 'unavailable' };
  const ctx = forInput(judgeCtx, input);
  const prompt = buildJudgePrompt(input);
  const asked = { model: ctx.model, prompt: { system: prompt.system, user: prompt.user } };
  const key = judgeCacheKey({
    model: ctx.model, endpoint: ctx.endpoint, promptVersion: JUDGE_PROMPT_VERSION, question: input.question, gold: input.expectedAnswer,
    extracted: input.extractedAnswer, responseTail: input.responseText, system: prompt.system, user: prompt.user,
  });
  // The run decides whether its verdicts may come from (and go to) the cache (`judge.cache`, a run setting).
  if (!ctx.settings.cache) cache = undefined;
  const hit = await readCache(ctx, cache, key);
  if (hit) {
    ctx.log.info({ event: 'judge_outcome', status: hit.status, cached: true }, 'judge verdict from cache');
    return { ...hit, asked, usage: { input_tokens: 0, output_tokens: 0 } };
  }
  let result = await callJudge(ctx, prompt, signal);
  let outcome = toJudgeResult(result, ctx.settings.max_retries + 1, ctx.clean);
  const usage = { input_tokens: 0, output_tokens: 0 };
  const count = (r: CallResult) => {
    if (!r.ok) return;
    usage.input_tokens += r.usage.input_tokens;
    usage.output_tokens += r.usage.output_tokens;
  };
  count(result);
  if (outcome.status === 'failed' && outcome.kind === 'no_verdict' && !signal?.aborted) {
    // A reply without a verdict is asked for once more; twice is the row's (masked, counted apart).
    ctx.log.warn({ event: 'judge_no_verdict', reason: outcome.reason }, 'judge reply held no verdict; asking once more');
    result = await callJudge(ctx, prompt, signal);
    outcome = toJudgeResult(result, ctx.settings.max_retries + 1, ctx.clean);
    count(result);
  }
  if (result.ok && result.servedModel) outcome = { ...outcome, servedModel: result.servedModel };
  const scored = outcome.status === 'scored';
  ctx.log.info(
    { event: 'judge_outcome', status: outcome.status, cached: false, verdict: outcome.status === 'scored' ? outcome.verdict : undefined, attempts: result.attempts },
    scored ? 'judge verdict' : `judge failed: ${outcome.reason}`,
  );
  await writeCache(ctx, cache, key, outcome);
  return { ...outcome, asked, usage };
}

/**
 * Build the Judge from the resolved config; throws only at creation (ConfigError: no key for
 * api.openai.com). grade() never throws for endpoint failures. On abort, grade() returns
 * `{ status: 'failed', reason: 'aborted' }` at once (it does not throw an AbortError), in a call or in
 * a retry wait alike, and sends nothing more.
 */
export function createJudge(options: CreateJudgeOptions): Judge {
  const ctx = createContext(options, resolveJudgeApiKey(options.config));
  const cache = options.cache;
  let closed = false;
  return {
    modelName: ctx.model,
    async grade(input, signal) {
      if (closed) return { status: 'failed', reason: 'the judge is closed', kind: 'unavailable' };
      return gradeWith(ctx, cache, input, signal);
    },
    async close() {
      closed = true;
    },
  };
}
