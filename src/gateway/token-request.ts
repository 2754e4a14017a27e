/**
 * The body the gateway sends upstream: the checked call with the run's sampling pinned over what
 * OpenCode sent (`policy.sampling`) and, with `policy.token_capture`, vLLM's token fields asked for
 * on a call that is not streamed (streamed tool calls have been reported to lose their token ids,
 * vllm-project/vllm#27482; the gateway streams to OpenCode itself). Pure.
 */
import type { ChatRequest } from './chat-request.ts';
import { TOKEN_FIELDS } from '../shared/records/token-fields.ts';

/** Sampling fields of OpenCode's own call that count as the sampling applied when the run pins none. */
const OPENCODE_SAMPLING = ['temperature', 'top_p', 'seed', 'stop', 'presence_penalty', 'frequency_penalty'] as const;

export type Sampling = Readonly<Record<string, unknown>>;

export interface UpstreamBody {
  payload: Buffer;
  /** The sampling fields the call was sent with (the run's over OpenCode's). */
  sampling: Record<string, unknown>;
}

export function upstreamBody(body: ChatRequest, pinned: Sampling, tokenCapture: boolean): UpstreamBody {
  const sampling: Record<string, unknown> = {};
  for (const k of OPENCODE_SAMPLING) if (body[k] !== undefined) sampling[k] = body[k];
  Object.assign(sampling, pinned);
  const out: Record<string, unknown> = { ...body, ...pinned };
  if (tokenCapture) {
    Object.assign(out, TOKEN_FIELDS, { stream: false });
    delete out.stream_options;
  }
  return { payload: Buffer.from(JSON.stringify(out)), sampling };
}
