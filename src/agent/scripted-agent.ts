/**
 * An AgentRunner that replays outcomes from a JSON script instead of running a model: for tests of
 * the fleet, benchmarks of the queue machinery, and dry runs. The script maps task ids (or `*`) to:
 *
 *   { "answer": "B" | "@gold", "stop_reason": "answered", "text": "...", "delay_ms": 200,
 *     "infra_fail_attempts": 2, "turns": 3, "tool_calls": 2, "input_tokens": 100, "output_tokens": 20 }
 *
 * A key `<task id>#<repeat>` scripts one repeat of a task, before its task id's entry and `*`.
 * `@gold` answers the task's gold answer. The text (default `The answer is \boxed{<answer>}.`) is the
 * response; its answer is extracted from it as a real session's is. `infra_fail_attempts: n` throws InfraError on the first n
 * attempts of a rollout (n >= the attempt budget makes it fail for good).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { STOP_REASONS, type AgentResult, type AgentRunner, type RolloutRequest, type RolloutTranscript } from '../shared/ports/agent.ts';
import { responseTail, rolloutOutcome, type RolloutOutcome } from '../shared/records/rollout-outcome.ts';
import { TRANSCRIPT_VERSION } from '../shared/records/transcript.ts';
import { extractAnswer } from '../shared/scoring/answer.ts';
import { finishedNaturally } from '../shared/scoring/rules.ts';
import { ConfigError, InfraError } from '../shared/errors.ts';

const EntrySchema = z
  .object({
    answer: z.string().nullable().default('@gold'),
    stop_reason: z.enum(STOP_REASONS).optional(),
    text: z.string().optional(),
    delay_ms: z.number().int().min(0).default(0),
    infra_fail_attempts: z.number().int().min(0).default(0),
    turns: z.number().int().min(0).default(1),
    tool_calls: z.number().int().min(0).default(0),
    input_tokens: z.number().int().min(0).default(0),
    output_tokens: z.number().int().min(0).default(0),
  })
  .strict();
export type ScriptEntry = z.infer<typeof EntrySchema>;

export const AgentScriptSchema = z.record(z.string(), EntrySchema);
export type AgentScript = z.infer<typeof AgentScriptSchema>;

export function loadAgentScript(file: string | null): AgentScript {
  if (!file) return { '*': EntrySchema.parse({}) };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`agent.script_path ${file}: ${(err as Error).message}`);
  }
  const parsed = AgentScriptSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(`agent.script_path ${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}

/** A one-turn transcript of a scripted rollout: the text it "answered". */
function scriptedTranscript(request: RolloutRequest, text: string, outcome: RolloutOutcome, started: number): RolloutTranscript {
  const t = request.task;
  return {
    record: {
      transcript_version: TRANSCRIPT_VERSION, run_id: request.runId, rollout_id: request.rolloutId, task_id: t.task_id,
      repeat: request.repeat, attempt: request.attempt ?? 1, benchmark: t.benchmark, policy_model: request.policy.model,
      task: { prompt: t.prompt, question: t.question, gold: t.gold, ans_type: t.ans_type, type: t.type, subtype: t.subtype, options: t.options, image_sha256: t.image_sha256 },
      started_at: new Date(started).toISOString(), wall_s: (Date.now() - started) / 1000,
      turns: [{ index: 0, started_at: new Date(started).toISOString(), latency_ms: 0, status: 200, error: null, finish_reason: 'stop', input_tokens: null, output_tokens: null, shown_images: [t.image_sha256], text, reasoning: null, tool_calls: [] }],
      outcome,
      judge: null, agent: null, image_mimes: { [t.image_sha256]: t.image_mime }, truncated: [],
    },
    images: new Map([[request.image.sha256, { mime: request.image.mime, bytes: request.image.bytes }]]),
  };
}

/** `script` entries may leave fields out: they take the defaults above. */
export function createScriptedAgent(input: z.input<typeof AgentScriptSchema>): AgentRunner {
  const script = AgentScriptSchema.parse(input);
  return {
    // It runs on this host, like a local session would (admission still counts its memory).
    host: { usesHostMemory: true, maxLifetimeS: null },
    async run(request: RolloutRequest, signal: AbortSignal): Promise<AgentResult> {
      const id = request.task.task_id;
      const entry = script[`${id}#${request.repeat}`] ?? script[id] ?? script['*'] ?? EntrySchema.parse({});
      const started = Date.now();
      if (entry.delay_ms > 0) await sleep(entry.delay_ms, undefined, { signal });
      if ((request.attempt ?? 1) <= entry.infra_fail_attempts) {
        throw new InfraError(`scripted infrastructure failure (attempt ${request.attempt ?? 1})`);
      }
      const answer = entry.answer === '@gold' ? request.task.gold : entry.answer;
      const text = entry.text ?? (answer === null ? 'I could not decide.' : `The answer is \\boxed{${answer}}.`);
      // The answer is read from the text by the one rule (shared/scoring/answer.ts), as a real session's is.
      const found = extractAnswer([text])?.answer ?? null;
      const stopReason = entry.stop_reason ?? (found === null ? 'no_answer' : 'answered');
      const outcome = rolloutOutcome({
        stop_reason: stopReason,
        extracted_answer: finishedNaturally(stopReason) ? found : null,
        ...responseTail(text),
        turns: entry.turns,
        tool_calls: entry.tool_calls,
        input_tokens: entry.input_tokens,
        output_tokens: entry.output_tokens,
        wall_s: (Date.now() - started) / 1000,
      });
      return { outcome, transcript: request.transcript.enabled ? scriptedTranscript(request, text, outcome, started) : null };
    },
    async close() {},
  };
}
