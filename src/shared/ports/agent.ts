/**
 * The contract between the sandbox-worker's queue machinery and whatever runs the agent. The real
 * implementation runs OpenCode in a sandbox; the scripted one replays answers from a file.
 */
import type { AgentSettings, PolicySettings } from '../config/run-settings.ts';
import type { RolloutOutcome } from '../records/rollout-outcome.ts';
import type { PreparedTask } from '../records/task.ts';
import type { TranscriptRecord } from '../records/transcript.ts';
import type { Trajectory } from '../records/trajectory.ts';

export { STOP_REASONS, type StopReason } from '../scoring/stop-reasons.ts';

/**
 * The policy a rollout calls: the run's `policy` section as it is (a `vcfleet serve` request's model,
 * output cap, sampling and weight version laid over it), and what this host chose: the endpoint and
 * its key. The gateway and the agent read the section's own keys.
 */
export interface RolloutPolicy {
  /** The run's policy settings (`RunSettings['policy']`), with a `vcfleet serve` request's choices laid over them. */
  settings: PolicySettings;
  /** The model every call asks for (`policy_model_name`, or a serve request's). */
  model: string;
  /** Chosen by the worker's own configuration (never by a run record it does not allow). */
  baseUrl: string;
  /** A secret: it stays in the worker process (the gateway adds it); it never enters a sandbox. */
  apiKey: string | null;
}

/** A rollout's transcript record and the images it references (bytes by SHA-256). */
export interface RolloutTranscript {
  record: TranscriptRecord;
  images: Map<string, { mime: string; bytes: Buffer }>;
}

/**
 * The fleet's pace of policy calls as a rollout's gateway uses it (a shared rate limit, adaptive
 * concurrency; the sandbox-worker's pacing/ implements it).
 */
export interface PolicyPace {
  /** Resolves when the fleet's limits allow one more call of about `tokens` tokens (at once when there are none), or `signal` aborts. */
  acquire(tokens: number, signal: AbortSignal): Promise<void>;
  /** A call ended: what it cost (`tokens`, against the `estimate` taken), how long it took, and whether (and for how long) the endpoint pushed back. */
  done(call: { tokens: number; estimate: number; latencyMs: number; completionTokens: number; backpressure: boolean; retryAfterMs?: number | null }): void;
  /** A call of the agent started or stopped waiting (for the share of session time spent waiting). */
  holding(delta: 1 | -1): void;
}

/** An image attached to the agent's first message. */
export interface RolloutImage {
  bytes: Buffer;
  mime: 'image/png' | 'image/jpeg' | 'image/webp';
  sha256: string;
}

export interface RolloutRequest {
  runId: string;
  rolloutId: string;
  repeat: number;
  task: PreparedTask;
  image: RolloutImage;
  /** More images after the first, attached in order (a `vcfleet serve` request with several); default none. */
  moreImages?: readonly RolloutImage[];
  policy: RolloutPolicy;
  /** Wall-clock budget of the whole rollout, in seconds. */
  timeoutS: number;
  /** The run's agent section as it is (the session stops past `max_tool_calls` tool calls). */
  agent: AgentSettings;
  /** Folder on the worker's host for `policy.capture` files (created when missing). */
  captureDir: string;
  /** Keep the transcript record (`transcripts.enabled`); bytes of images kept in it. */
  transcript: { enabled: boolean; imageBudgetBytes: number };
  /** 1 for the first attempt of this rollout, 2 after one infrastructure retry, ... */
  attempt?: number;
  /**
   * How the agent's policy calls are paced: the fleet's pace (none: they go out at once) and the
   * bound of the time they may be held on the endpoint's back-pressure (`policy.max_wait_s`; default 600).
   */
  pacing?: { pace?: PolicyPace; maxWaitS: number };
}

/** What a rollout produced: its outcome (rollout-outcome.ts) and, when kept, its transcript. */
export interface AgentResult {
  outcome: RolloutOutcome;
  /** The transcript, when kept. */
  transcript: RolloutTranscript | null;
  /** The trajectory, with token capture on (`policy.token_capture`); its images are the transcript's or the gateway's. */
  trajectory?: RolloutTrajectory | null;
}

/** A rollout's trajectory and the bytes of the images it names (by SHA-256). */
export interface RolloutTrajectory {
  record: Trajectory;
  images: Map<string, { mime: string; bytes: Buffer }>;
}

/**
 * Runs one rollout. Returns a result for every way the *model* can end (answered or not); throws
 * InfraError when the infrastructure failed (sandbox provider, policy endpoint unreachable), so that
 * the rollout is retried. Must honour `signal` and always clean up its sandbox.
 */
/** What bounds a runner's sessions, as its sandbox provider declares it. */
export interface AgentHost {
  /** The sessions run on this host: its memory bounds them (admission counts them against it). */
  usesHostMemory: boolean;
  /** The longest a session's sandbox lives, in seconds; null: as long as its task. */
  maxLifetimeS: number | null;
}

export interface AgentRunner {
  readonly host: AgentHost;
  run(request: RolloutRequest, signal: AbortSignal): Promise<AgentResult>;
  /** Release what the runner holds (reap sandboxes, close servers). Safe to call twice. */
  close(): Promise<void>;
}
