/**
 * The token fields of one non-streamed chat.completion as vLLM returns them when asked
 * (gateway/token-request.ts, with TOKEN_FIELDS): `prompt_token_ids` (top level; some versions put it on the choice),
 * `choices[0].token_ids`, and `choices[0].logprobs.content[].logprob` (with
 * `return_tokens_as_token_ids` each entry's `token` is `token_id:<id>`, which gives the ids when
 * `token_ids` is missing). The body is the policy server's, read strictly and bounded: a field that
 * is absent, too long or not what it should be is named in `missing`, never thrown.
 */

/** What vLLM needs to return the prompt's and the generation's token ids and the generation's log-probabilities (gateway/token-request.ts asks with it). */
export const TOKEN_FIELDS = { logprobs: true, top_logprobs: 0, return_tokens_as_token_ids: true, return_token_ids: true } as const;

/** Token ids kept per array (a prompt of a 1M-token context fits). */
export const MAX_TOKEN_IDS = 1 << 20;
const MAX_ID = 2 ** 31 - 1;

export type TokenField = 'prompt_token_ids' | 'token_ids' | 'logprobs';

export interface TokenFields {
  promptIds: number[] | null;
  generationIds: number[] | null;
  /** One per generated token; null when absent or not one per token. */
  logprobs: number[] | null;
  /** The fields the answer did not carry (or carried malformed), by vLLM's names. */
  missing: TokenField[];
  /** The answer's message (`choices[0].message`) as the server returned it; null when absent. */
  message?: Record<string, unknown> | null;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null);

function ids(v: unknown): number[] | null {
  if (!Array.isArray(v) || v.length > MAX_TOKEN_IDS) return null;
  for (const x of v) if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > MAX_ID) return null;
  return v as number[];
}

const TOKEN_ID = /^token_id:(\d{1,10})$/;

/** Log-probabilities (and the ids `token_id:<id>` names) of `logprobs.content`, or null. */
function logprobEntries(v: unknown): { logprobs: number[]; ids: number[] | null } | null {
  const content = obj(v)?.content;
  if (!Array.isArray(content) || content.length > MAX_TOKEN_IDS) return null;
  const logprobs: number[] = [];
  let fromTokens: number[] | null = [];
  for (const e of content) {
    const entry = obj(e);
    const lp = entry?.logprob;
    if (typeof lp !== 'number' || !Number.isFinite(lp) || lp > 0) return null;
    logprobs.push(lp);
    const m = typeof entry?.token === 'string' ? TOKEN_ID.exec(entry.token) : null;
    if (m && Number(m[1]) <= MAX_ID) fromTokens?.push(Number(m[1]));
    else fromTokens = null;
  }
  return { logprobs, ids: fromTokens };
}

/** The token fields of a chat.completion body (parsed JSON). */
export function readTokenFields(body: unknown): TokenFields {
  const b = obj(body);
  const choice = obj(Array.isArray(b?.choices) ? b.choices[0] : null);
  const promptIds = ids(b?.prompt_token_ids) ?? ids(choice?.prompt_token_ids);
  const entries = logprobEntries(choice?.logprobs);
  const generationIds = ids(choice?.token_ids) ?? entries?.ids ?? null;
  const logprobs = entries && generationIds && entries.logprobs.length === generationIds.length ? entries.logprobs : null;
  const missing: TokenField[] = [];
  if (!promptIds) missing.push('prompt_token_ids');
  if (!generationIds) missing.push('token_ids');
  if (!logprobs) missing.push('logprobs');
  return { promptIds, generationIds, logprobs, missing, message: obj(choice?.message) };
}

/** A copy of the body without the token fields (what OpenCode gets: it needs none of them). */
export function withoutTokenFields(body: Json): Json {
  const out: Json = { ...body };
  delete out.prompt_token_ids;
  if (Array.isArray(out.choices)) {
    out.choices = out.choices.map((c) => {
      const choice = obj(c);
      if (!choice) return c;
      const { token_ids: _ids, logprobs: _lp, prompt_token_ids: _p, ...rest } = choice;
      return rest;
    });
  }
  return out;
}
