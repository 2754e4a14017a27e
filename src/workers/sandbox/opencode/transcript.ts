/**
 * The full record of one rollout, written to `<transcriptDir>/<rolloutId>.json` on the worker's
 * host (never to Redis): events, texts, tool calls, usage, the gateway's call log, stderr tail and
 * OpenCode's own error log lines. Image data URLs are already replaced by placeholders.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AgentResult } from '../../../shared/agent.ts';
import { scrub } from '../../../shared/logger.ts';
import type { GatewayCall, GatewayStats } from '../gateway/policy-gateway.ts';
import type { SessionEventLog } from './events.ts';

export interface TranscriptInput {
  runId: string;
  rolloutId: string;
  taskId: string;
  startedAt: string;
  result: Omit<AgentResult, 'transcriptPath'>;
  log: SessionEventLog;
  gateway: { stats: GatewayStats; calls: readonly GatewayCall[] } | null;
  exec: { exitCode: number | null; signal: string | null; timedOut: boolean; aborted: boolean; durationMs: number } | null;
  stderr: string;
  opencodeLog: { lines: number; kept: string[] };
  infraError?: string;
}

/** A file-name-safe form of a rollout id. */
export function safeFileStem(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, '_');
}

export function transcriptPathFor(transcriptDir: string, rolloutId: string, suffix = '.json'): string {
  return path.join(transcriptDir, `${safeFileStem(rolloutId)}${suffix}`);
}

/** Write the transcript; every secret in `secrets` is scrubbed from the file, wherever it appears. */
export async function writeTranscript(file: string, input: TranscriptInput, secrets: readonly string[]): Promise<void> {
  const { log } = input;
  const doc = {
    version: 1,
    runId: input.runId,
    rolloutId: input.rolloutId,
    taskId: input.taskId,
    sessionId: log.sessionId,
    startedAt: input.startedAt,
    result: input.result,
    infraError: input.infraError,
    texts: log.texts,
    toolCalls: log.toolCalls,
    steps: log.steps,
    errors: log.errors,
    gateway: input.gateway,
    exec: input.exec,
    stderrTail: input.stderr.slice(-8000),
    opencodeLog: input.opencodeLog,
    unparsedStdout: log.badLines,
    events: log.events,
  };
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, scrub(JSON.stringify(doc, null, 1), secrets));
}
