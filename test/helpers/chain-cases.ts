/**
 * The eight multi-call cases of the token chain (issue 33), as raw Qwen3 generations for the
 * real-template server (qwen3-policy-server.ts), and one rollout of the real OpenCode in a `local`
 * sandbox against it. Shared by test/agent/token-chain-opencode.test.ts and bench/token-chain.ts.
 * Each case calls one tool, then answers; its second call's prompt must extend the first call's
 * prompt + generation for the rollout to chain.
 */
import { rolloutPolicy } from './policy.ts';
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { AgentResult, RolloutRequest } from '../../src/shared/ports/agent.ts';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import type { Logger } from '../../src/shared/logger.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import type { SandboxProvider } from '../../src/sandboxes/types.ts';
import { encodePng } from '../../src/demo/png.ts';
import type { Qwen3Script, Qwen3Switches } from './qwen3-policy-server.ts';

export const CHAIN_KEY = 'sk-policy-secret-chain';
export const CHAIN_IMAGE = Buffer.from(encodePng(40, 30, (x) => (x < 20 ? [200, 20, 20] : [20, 20, 200])));
export const CHAIN_SHA = createHash('sha256').update(CHAIN_IMAGE).digest('hex');

const tools = (messages: readonly Record<string, unknown>[]) => messages.filter((m) => m.role === 'tool').length;
const call = (name: string, args: string) => `<tool_call>\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`;
const BASH = '{"command": "echo left-is-red", "description": "Say it"}';
const READ = '{"filePath": "puzzle.png"}';
const ANSWER = 'The left half is red. \\boxed{B}';
const think = (text: string) => `<think>\n${text}\n</think>\n\n`;

/** One tool call, then the answer. */
const twoStep = (first: string, last = ANSWER): Qwen3Script => (messages) => (tools(messages) === 0 ? first : last);

export interface ChainCase {
  id: number;
  name: string;
  script: Qwen3Script;
  reasoningField: Qwen3Switches['reasoningField'];
}

export const CHAIN_CASES: readonly ChainCase[] = [
  { id: 1, name: 'bash call in the template\'s JSON spacing', script: twoStep(call('bash', BASH)), reasoningField: 'reasoning' },
  { id: 2, name: 'arguments\' keys in another order', script: twoStep(call('bash', '{"description": "Say it", "command": "echo left-is-red"}')), reasoningField: 'reasoning' },
  { id: 3, name: 'compact JSON arguments', script: twoStep(call('bash', '{"command":"echo left-is-red","description":"Say it"}')), reasoningField: 'reasoning' },
  { id: 4, name: 'thinking, server reads `reasoning`', script: twoStep(think('I should check the colours.') + call('bash', BASH), think('It printed left.') + ANSWER), reasoningField: 'reasoning' },
  { id: 5, name: 'thinking, server also reads `reasoning_content`', script: twoStep(think('I should check the colours.') + call('bash', BASH), think('It printed left.') + ANSWER), reasoningField: 'both' },
  { id: 6, name: 'image `read` between calls', script: twoStep(call('read', READ)), reasoningField: 'reasoning' },
  { id: 7, name: 'thinking with an image `read`', script: twoStep(think('Let me look at it.') + call('read', READ), think('I saw it.') + ANSWER), reasoningField: 'reasoning' },
  { id: 8, name: 'text beside a bash call', script: twoStep(`Let me check.\n${call('bash', BASH)}`), reasoningField: 'reasoning' },
];

export interface ChainRunOptions {
  provider: SandboxProvider;
  logger: Logger;
  root: string;
  url: string;
  id: string;
  restoreTurns: boolean;
  splice: boolean;
  /** Output cap per call and task timeout (s); defaults 2048 and 100. */
  maxOutputTokens?: number;
  timeoutS?: number;
  maxCallsPerRollout?: number;
}

export function chainRequest(o: ChainRunOptions): RolloutRequest {
  return {
    runId: 'run-chain', rolloutId: `${o.id}:r0`, repeat: 0, attempt: 1,
    task: {
      task_id: o.id, benchmark: 'babyvision_opencode', gold: 'B', type: 't', subtype: 's', prompt: 'Which half is red? (A) right (B) left. Answer \\boxed{X}.',
      question: 'Which half is red?', ans_type: 'choice', options: ['right', 'left'], image_sha256: CHAIN_SHA, image_mime: 'image/png', image_file: 'x.png',
    },
    image: { bytes: CHAIN_IMAGE, mime: 'image/png', sha256: CHAIN_SHA },
    policy: rolloutPolicy(o.url, {
      apiKey: CHAIN_KEY, model: 'qwen3',
      settings: {
        context_window: 64000, max_output_tokens: o.maxOutputTokens ?? 2048, request_timeout_s: 60, max_request_mib: 64, max_calls_per_rollout: o.maxCallsPerRollout ?? 100,
        token_capture: true, token_capture_restore_turns: o.restoreTurns, token_capture_splice: o.splice, sampling: { temperature: 1 }, weight_version: 'step-1',
      },
    }),
    timeoutS: o.timeoutS ?? 100, agent: { max_tool_calls: 50 }, captureDir: path.join(o.root, 'captures'),
    transcript: { enabled: true, imageBudgetBytes: 32 * 1024 * 1024 },
  };
}

/** One rollout of the real OpenCode against the server at `o.url`. */
export async function runChain(o: ChainRunOptions): Promise<AgentResult> {
  const runner = createOpenCodeRunner({ config: ConfigSchema.parse({ policy_api_key: CHAIN_KEY }), logger: o.logger, provider: o.provider, socketDir: path.join(o.root, 'sockets') });
  try {
    return await runner.run(chainRequest(o), new AbortController().signal);
  } finally {
    await runner.close();
  }
}
