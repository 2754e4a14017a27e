/**
 * With `policy.token_capture_splice`: whether the policy server continues from the token ids the
 * gateway carries on an earlier assistant message (NeMo Gym's `prompt_token_ids`,
 * `generation_token_ids`, `generation_log_probs`; NeMo RL's vLLM server splices them) rather than
 * from its own rendering of that message. Two one-token calls asked as the gateway asks: the second
 * repeats the first's answer under other text, carrying the first's ids; a splicing server's prompt
 * starts with the first prompt + generation, a plain one's does not. The preflight says which.
 */
import type { PolicySettings } from '../shared/config/run-settings.ts';
import { authHeaders, call, type PreflightFailure } from './preflight.ts';
import { stripCredentials } from '../shared/config/run-settings.ts';
import { readTokenFields, TOKEN_FIELDS } from '../shared/records/token-fields.ts';

/** Whether the server spliced: true, false, or the reason it could not be told. */
export async function serverSplices(baseUrl: string, apiKey: string | null, model: string | null): Promise<boolean | string> {
  const base = baseUrl.replace(/\/+$/, '');
  const ask = (messages: unknown[]) => call(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...authHeaders(apiKey) },
    body: JSON.stringify({ model: model ?? 'any', messages, max_tokens: 1, stream: false, ...TOKEN_FIELDS }),
  });
  const user = { role: 'user', content: 'ping' };
  const first = await ask([user]);
  if ('error' in first) return `unreachable (${first.error})`;
  const a = readTokenFields(first.body);
  if (!a.promptIds || !a.generationIds) return `a one-token call came back without ${a.missing.join(', ')}`;
  const carried = { role: 'assistant', content: 'splice check: not what was generated', prompt_token_ids: a.promptIds, generation_token_ids: a.generationIds, generation_log_probs: a.logprobs ?? [] };
  const second = await ask([user, carried, { role: 'user', content: 'pong' }]);
  if ('error' in second) return `unreachable (${second.error})`;
  const prompt = readTokenFields(second.body).promptIds;
  if (!prompt) return `answered HTTP ${second.status} without prompt_token_ids to a call carrying token ids`;
  const prefix = [...a.promptIds, ...a.generationIds];
  return prompt.length > prefix.length && prefix.every((id, i) => prompt[i] === id);
}

/** The preflight of `policy.token_capture_splice` (with token capture): a server that does not splice fails it, naming what to do. */
export async function checkSplice(policy: Pick<PolicySettings, 'token_capture' | 'token_capture_splice'>, baseUrl: string, apiKey: string | null, model: string | null): Promise<PreflightFailure | null> {
  if (!policy.token_capture || !policy.token_capture_splice) return null;
  const spliced = await serverSplices(baseUrl, apiKey, model);
  if (spliced === true) return null;
  const why = spliced === false ? 'did not continue from the token ids carried on the assistant message (it re-renders earlier turns: it does not splice)' : spliced;
  return {
    check: 'policy',
    message: `policy server ${stripCredentials(baseUrl)}/chat/completions: ${why}; policy.token_capture_splice needs a splicing server (NeMo RL's vLLM server), or set ++policy.token_capture_splice=false (chains then hold only where the template re-renders turns as generated)`,
  };
}
