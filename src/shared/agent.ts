/**
 * The contract between the sandbox-worker's queue machinery and whatever runs the agent. The real
 * implementation runs OpenCode in a sandbox; the scripted one replays answers from a file.
 */
import type { PreparedTask } from './task.ts';

export const STOP_REASONS = ['answered', 'no_answer', 'timeout', 'output_cap', 'context_limit', 'agent_error'] as const;
export type StopReason = (typeof STOP_REASONS)[number];

export interface PolicyEndpoint {
  baseUrl: string;
  /** A secret: it stays in the worker process (the gateway adds it); it never enters a sandbox. */
  apiKey: string | null;
  modelName: string;
  contextWindow: number;
  maxOutputTokens: number;
  requestTimeoutS: number;
  /** Store each policy call's request and response beside the rollout. */
  capture: boolean;
}

export interface RolloutRequest {
  runId: string;
  rolloutId: string;
  repeat: number;
  task: PreparedTask;
  image: { bytes: Buffer; mime: 'image/png' | 'image/jpeg'; sha256: string };
  policy: PolicyEndpoint;
  /** Wall-clock budget of the whole rollout, in seconds. */
  timeoutS: number;
  /** Folder for this run's transcripts on the worker's host (created when missing). */
  transcriptDir: string;
  /** 1 for the first attempt of this rollout, 2 after one infrastructure retry, ... */
  attempt?: number;
}

export interface AgentResult {
  stopReason: StopReason;
  /** All assistant text of the session, in order (the judge sees its end). */
  responseText: string;
  /** The last `\boxed{...}` content, or null. */
  extractedAnswer: string | null;
  turns: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  wallS: number;
  /** Why the agent failed, for `agent_error` (never contains secrets). */
  error?: string;
  transcriptPath?: string;
}

/**
 * Runs one rollout. Returns a result for every way the *model* can end (answered or not); throws
 * InfraError when the infrastructure failed (sandbox provider, policy endpoint unreachable), so that
 * the rollout is retried. Must honour `signal` and always clean up its sandbox.
 */
export interface AgentRunner {
  run(request: RolloutRequest, signal: AbortSignal): Promise<AgentResult>;
  /** Release what the runner holds (reap sandboxes, close servers). Safe to call twice. */
  close(): Promise<void>;
}
