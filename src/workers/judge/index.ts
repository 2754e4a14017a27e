/** The judge role's public pieces (the BullMQ worker adapter lives in worker.ts). */
export { createJudge, resolveJudgeApiKey, PLACEHOLDER_API_KEY, type CreateJudgeOptions } from './openai-judge.ts';
export {
  buildJudgePrompt, headChars, tailChars, questionForJudge, responseForJudge, extractedForJudge,
  QUESTION_MAX_CHARS, RESPONSE_TAIL_CHARS, NO_EXTRACTED_ANSWER, PROMPT_TAGS, type JudgePrompt,
} from './prompt.ts';
export { parseVerdict, type ParsedVerdict } from './verdict.ts';
export { backoffMs, retryAfterMs, RETRY_AFTER_CAP_MS, type BackoffOptions } from './backoff.ts';
export { classifyCallError, isRetryableStatus, type CallFailure } from './call-errors.ts';
export {
  createRedisJudgeCache, createMemoryJudgeCache, judgeCacheKey, redisJudgeCacheKey,
  type JudgeCache, type CachedVerdict,
} from './judge-cache.ts';
export { judgeLimiter, limiterForRate } from './limiter.ts';
