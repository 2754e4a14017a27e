/**
 * Preflight: before a run enqueues anything (and when a worker starts), check what would otherwise
 * fail rollout after rollout: the policy endpoint answers and serves the model, the judge endpoint
 * accepts its key, the sandbox provider can start a sandbox held to its limits, Redis keeps its data,
 * and the results host can write its output. Each failure is one line that names the URL, key or
 * path and says what to do.
 */
import type { PolicySettings } from '../shared/config/run-settings.ts';
import { mkdir, access } from 'node:fs/promises';
import { constants } from 'node:fs';
import type { Config } from '../shared/config/load.ts';
import { ConfigError, errorMessage } from '../shared/errors.ts';
import { redisPersists, type Redis } from '../shared/redis/connect.ts';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { readTokenFields, TOKEN_FIELDS } from '../shared/records/token-fields.ts';

export interface PreflightFailure {
  check: 'policy' | 'judge' | 'sandbox' | 'redis' | 'output';
  /** One line: what failed, where, and what to do. */
  message: string;
}

const TIMEOUT_MS = 10_000;

type Answer = { status: number; body: unknown } | { error: string };

export async function call(url: string, init: RequestInit): Promise<Answer> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { status: res.status, body };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { error: cause?.code ?? cause?.message ?? errorMessage(err) };
  }
}

export function authHeaders(key: string | null): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

function modelIds(body: unknown): string[] | null {
  const data = (body as { data?: unknown } | null)?.data;
  return Array.isArray(data) ? data.map((m) => String((m as { id?: unknown })?.id)) : null;
}

/**
 * The policy endpoint answers `GET /models` and lists the model (or, without `/models`, a one-token
 * chat call works). With `model` null (a worker, which serves whatever model a run names), only that
 * the endpoint answers and accepts the key.
 */
export async function checkPolicy(baseUrl: string, apiKey: string | null, model: string | null): Promise<PreflightFailure | null> {
  const base = baseUrl.replace(/\/+$/, '');
  const shown = stripCredentials(base);
  const fail = (why: string, fix: string): PreflightFailure => ({ check: 'policy', message: `policy server ${shown}: ${why}; ${fix}` });
  const listed = await call(`${base}/models`, { headers: authHeaders(apiKey) });
  if ('error' in listed) return fail(`unreachable (${listed.error})`, 'start it, or set POLICY_BASE_URL (policy_base_url) to where it listens');
  if (listed.status === 401 || listed.status === 403) return fail(`refused the key (HTTP ${listed.status})`, 'check POLICY_API_KEY');
  const ids = listed.status === 200 ? modelIds(listed.body) : null;
  if (ids && model === null) return null;
  if (ids && model !== null) {
    return ids.includes(model) ? null : fail(`does not serve model "${model}" (it lists ${ids.slice(0, 8).join(', ') || 'none'})`, 'set POLICY_MODEL (policy_model_name) to one it serves');
  }
  const chat = await call(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...authHeaders(apiKey) },
    body: JSON.stringify({ model: model ?? 'any', messages: [{ role: 'user', content: 'ping' }], max_tokens: 1 }),
  });
  if ('error' in chat) return fail(`unreachable (${chat.error})`, 'start it, or set POLICY_BASE_URL');
  if (chat.status >= 200 && chat.status < 300) return null;
  // A worker does not know the model: an answer that is not an outage or a refusal will do.
  if (model === null && chat.status >= 400 && chat.status < 500 && chat.status !== 401 && chat.status !== 403) return null;
  return fail(`answered HTTP ${chat.status} to GET /models and to a one-token chat call`, 'check POLICY_BASE_URL (it ends in /v1), POLICY_MODEL and POLICY_API_KEY');
}

/**
 * With `policy.token_capture`: a one-token chat call asked as the gateway asks (vLLM's fields, not
 * streamed) comes back with the prompt's and the generation's token ids and the log-probabilities;
 * otherwise every trajectory of the run would be masked, so the run does not start.
 */
export async function checkTokenCapture(policy: Pick<PolicySettings, 'token_capture'>, baseUrl: string, apiKey: string | null, model: string | null): Promise<PreflightFailure | null> {
  if (!policy.token_capture) return null;
  const base = baseUrl.replace(/\/+$/, '');
  const shown = stripCredentials(base);
  const fail = (why: string): PreflightFailure => ({
    check: 'policy',
    message: `policy server ${shown}/chat/completions: ${why}; policy.token_capture needs a server that returns token ids and log-probabilities (vLLM: logprobs, return_token_ids), or set ++policy.token_capture=false`,
  });
  const answer = await call(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...authHeaders(apiKey) },
    body: JSON.stringify({ model: model ?? 'any', messages: [{ role: 'user', content: 'ping' }], max_tokens: 1, stream: false, ...TOKEN_FIELDS }),
  });
  if ('error' in answer) return fail(`unreachable (${answer.error})`);
  if (answer.status < 200 || answer.status >= 300) return fail(`answered HTTP ${answer.status} to a one-token call with the token fields`);
  const { missing } = readTokenFields(answer.body);
  return missing.length === 0 ? null : fail(`a one-token call came back without ${missing.join(', ')}`);
}

/** The judge endpoint accepts the judge key (`GET /models`, no tokens spent). */
export async function checkJudge(config: Config, apiKey: string): Promise<PreflightFailure | null> {
  const base = config.visual_coding_opencode_judge_base_url.replace(/\/+$/, '');
  const shown = stripCredentials(base);
  const answer = await call(`${base}/models`, { headers: authHeaders(apiKey) });
  if ('error' in answer) return { check: 'judge', message: `judge endpoint ${shown}: unreachable (${answer.error}); check visual_coding_opencode_judge_base_url (JUDGE_BASE_URL)` };
  if (answer.status === 401 || answer.status === 403) return { check: 'judge', message: `judge endpoint ${shown}: refused the key (HTTP ${answer.status}); check OPENAI_API_KEY (judge.api_key)` };
  if (answer.status >= 500) return { check: 'judge', message: `judge endpoint ${shown}: failing (HTTP ${answer.status}); try again later or point JUDGE_BASE_URL elsewhere` };
  return null;
}

/** Redis keeps what it holds across a restart (append-only file or snapshots). */
export async function checkRedisPersistence(redis: Redis): Promise<PreflightFailure | null> {
  // null: CONFIG is disabled (a managed Redis); it says nothing, so nothing is refused.
  if ((await redisPersists(redis)) !== false) return null;
  return {
    check: 'redis',
    message: 'Redis persists nothing (appendonly no, no save points): a Redis restart would lose the run; run it with --appendonly yes, or accept the risk with ++preflight.require_redis_persistence=false',
  };
}

/** The results host can create and write the run's output folder. */
export async function checkOutputFolder(folder: string): Promise<PreflightFailure | null> {
  try {
    await mkdir(folder, { recursive: true });
    await access(folder, constants.W_OK);
    return null;
  } catch (err) {
    return { check: 'output', message: `cannot write the output folder ${folder} (${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}): make it writable, or set output_root / output_jsonl_fpath` };
  }
}

/** Thrown when a preflight check failed: every failure, one line each (exit code 2), and how to skip it with the command at hand. */
export class PreflightError extends ConfigError {
  override name = 'PreflightError';
  constructor(readonly failures: readonly PreflightFailure[], skip = '--skip-preflight') {
    super(`preflight failed, nothing was enqueued:\n  ${failures.map((f) => f.message).join('\n  ')}\n(to start anyway: ${skip})`);
  }
}

/** Throw every failure at once, or nothing; `skip` is how the command at hand skips the checks (`vcfleet demo` has no `--skip-preflight`). */
export function requirePassed(results: ReadonlyArray<PreflightFailure | null>, skip?: string): void {
  const failures = results.filter((r): r is PreflightFailure => r !== null);
  if (failures.length) throw new PreflightError(failures, skip);
}
