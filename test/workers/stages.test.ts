/**
 * Each stage on its own, on a real Redis: the rollout stage (routing by stop reason, the transcript
 * kept, a run record of another version refused), the judge stage (scored and failed gradings, the
 * judge's part of the transcript), the results stage (new, duplicate and replaced rows, the
 * transcript written beside the JSONL), and the adapter's poison and shutdown paths.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Judge, JudgeInput, JudgeResult } from '../../src/shared/ports/judge.ts';
import { produceRun } from '../../src/producer/produce.ts';
import { loadPreparedBenchmark } from '../../src/prepare/load-prepared.ts';
import { PoisonJobError } from '../../src/shared/errors.ts';
import { enqueue, openQueue, parseJob, rolloutId, type JudgeJob, type RolloutJob } from '../../src/shared/queue/registry.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import { buildRow, shouldReplace } from '../../src/shared/records/rows.ts';
import { RunStore } from '../../src/shared/stores/run-store.ts';
import { startStageWorker } from '../../src/shared/queue/stage-worker.ts';
import { TRANSCRIPT_VERSION, TranscriptRecordSchema, type TranscriptRecord } from '../../src/shared/records/transcript.ts';
import { encodeTranscript } from '../../src/shared/records/transcript-codec.ts';
import { runJudgeStage } from '../../src/workers/judge/judge-stage.ts';
import { createJudge } from '../../src/workers/judge/openai-judge.ts';
import { startScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { RunOutput } from '../../src/workers/results/run-output.ts';
import { RecordWriter } from '../../src/workers/results/record-writer.ts';
import { commitRow } from '../../src/workers/results/worker.ts';
import { runRolloutStage, type SandboxHostSettings } from '../../src/workers/sandbox/rollout-stage.ts';
import { rowContext } from '../../src/shared/stores/row-context.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { makeFleetEnv, REDIS_URL, waitFor, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';

const HOST: SandboxHostSettings = { policyBaseUrl: 'http://127.0.0.1:8000/v1', allowedBaseUrls: [], policyApiKey: null, captureRoot: '/nonexistent' };

/** A judge configured with another model than the run's: the run's is the one asked for. */
function stubJudge(outcome: JudgeResult, seen: JudgeInput[] = []): Judge {
  return { modelName: 'host-judge', grade: async (input) => (seen.push(input), outcome), close: async () => {} };
}

describe('stages', () => {
  let env: FleetEnv;
  let client: Redis;
  let worker: Redis;
  let store: RunStore;
  let taskIds: string[];

  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 4, judgeUrl: 'http://127.0.0.1:9/v1', overrides: ['++run_id=st', '++visual_coding_opencode_judge_model_name=run-judge', '++judge.max_tokens=77'] });
    client = createRedis(REDIS_URL, 'client');
    worker = createRedis(REDIS_URL, 'worker');
    store = new RunStore(client, env.prefix);
    const config = env.config();
    const bench = await loadPreparedBenchmark(config.data_dir, config.benchmark);
    taskIds = bench.tasks.map((t) => t.task_id);
    await produceRun({ config, redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
  });
  afterAll(async () => {
    client?.disconnect();
    worker?.disconnect();
    await env?.cleanup();
    removeTmpDirs();
  });

  const job = (i: number, runId = 'st'): RolloutJob => ({ v: 1, run_id: runId, task_id: taskIds[i], repeat: 0, rollout_id: rolloutId(runId, taskIds[i], 0) });
  const minimalRecord = (rollout: string): TranscriptRecord => TranscriptRecordSchema.parse({
    transcript_version: TRANSCRIPT_VERSION, run_id: 'st', rollout_id: rollout, task_id: 't', repeat: 0, attempt: 1, benchmark: 'b', policy_model: 'p',
    task: { prompt: 'p', question: 'q', gold: 'A', ans_type: 'choice', type: 't', subtype: 's', image_sha256: 'x' }, started_at: '', wall_s: 0, turns: [],
    outcome: { stop_reason: 'no_answer', extracted_answer: null, error: null },
  });
  const never = new AbortController().signal;

  it('rollout stage: a finished run with text goes to the judge (an answer extracted or not), anything else to the results with reward 0; the transcript waits in Redis', async () => {
    const agent = createScriptedAgent({
      [taskIds[0]]: { answer: '@gold' }, [taskIds[1]]: { answer: null, text: '' }, [taskIds[2]]: { answer: null, stop_reason: 'timeout' },
      [taskIds[3]]: { answer: null, text: 'There are twelve squares.' },
    });
    const answered = await runRolloutStage(job(0), { store, agent, host: HOST }, never);
    expect(answered).toMatchObject({ next: 'judge', job: { rollout_id: job(0).rollout_id, outcome: { stop_reason: 'answered' } } });
    expect(await store.getOutcome('st', job(0).rollout_id)).toMatchObject({ stop_reason: 'answered' });
    expect((await store.getTranscriptParts('st', job(0).rollout_id)).record).not.toBeNull();
    const silent = await runRolloutStage(job(1), { store, agent, host: HOST }, never);
    expect(silent).toMatchObject({ next: 'results', row: { stop_reason: 'no_answer', reward: 0, failure_kind: null, judge_verdict: null, failure_reason: 'no_response' } });
    const stated = await runRolloutStage(job(3), { store, agent, host: HOST }, never);
    expect(stated).toMatchObject({ next: 'judge', job: { outcome: { stop_reason: 'no_answer', extracted_answer: null, response_tail: 'There are twelve squares.' } } });
    const late = await runRolloutStage(job(2), { store, agent, host: HOST }, never);
    expect(late).toMatchObject({ next: 'results', row: { stop_reason: 'timeout', reward: 0 } });
  });

  it('rollout stage: a run record of another settings version stops the job with a message that says so', async () => {
    const run = await store.requireRun('st');
    await store.createRun({ ...run, run_id: 'st-old', settings: { settings_version: 99 } });
    await store.putTasks('st-old', [await store.getTask('st', taskIds[0])]);
    const err = await runRolloutStage(job(0, 'st-old'), { store, agent: createScriptedAgent({}), host: HOST }, never).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoisonJobError);
    expect((err as Error).message).toMatch(/run st-old was produced by a vcfleet whose run settings are version 99; this worker reads versions 1 and 2/);
  });

  it('judge stage: a verdict is a scored row, a failure a masked judge_failed row; both leave the judge\'s part of the transcript', async () => {
    const outcome = (await store.getOutcome('st', job(0).rollout_id))!;
    const judgeJob: JudgeJob = { ...job(0), outcome };
    const seen: JudgeInput[] = [];
    const scored = await runJudgeStage(judgeJob, { store, judge: stubJudge({ status: 'scored', verdict: 'equivalent', reason: 'same', reward: 1, cached: false }, seen) });
    expect(seen[0].run).toEqual({ visual_coding_opencode_judge_model_name: 'run-judge', judge: { temperature: 0, max_tokens: 77, cache: true } }); // the run's judge settings, not the host's
    expect(scored).toMatchObject({ reward: 1, judge_verdict: 'equivalent', judge_reason: 'same', judge_model: 'run-judge', failure_kind: null });
    const part = JSON.parse((await store.getTranscriptParts('st', job(0).rollout_id)).judge!);
    expect(part).toMatchObject({ model: 'run-judge', verdict: 'equivalent', reason: 'same' });
    expect(part.prompt.user).toContain('"gold_answer"');
    const failed = await runJudgeStage(judgeJob, { store, judge: stubJudge({ status: 'failed', reason: 'no valid verdict' }) });
    expect(failed).toMatchObject({ reward: null, failure_kind: 'judge_failed', error: 'no valid verdict', judge_model: 'run-judge' });
  });

  it('a long answer is cut once, by code point, where the rollout ends, and the real judge is told it was cut', async () => {
    const long = `${'🙂'.repeat(5000)} and so \\boxed{${'A'}}`;
    const agent = createScriptedAgent({ [taskIds[0]]: { answer: 'A', text: long } });
    const out = await runRolloutStage(job(0, 'st'), { store, agent, host: HOST }, never);
    expect(out.next).toBe('judge');
    if (out.next !== 'judge') return;
    const tail = out.job.outcome.response_tail;
    expect([...tail]).toHaveLength(4000);
    expect(tail.charCodeAt(0)).not.toBe(0xde42); // never the low half of a pair
    expect(out.job.outcome.response_truncated).toBe(true);
    const server = await startScriptedJudgeServer();
    const judge = createJudge({ config: env.config([`++visual_coding_opencode_judge_base_url=${server.url}`]), logger: env.logger });
    try {
      await runJudgeStage(out.job, { store, judge });
      expect(server.requests[0].user).toContain('(The response was cut: only its last 4000 characters are shown.)');
    } finally {
      await server.close();
    }
  });

  it('judge stage: a refusal the rollout\'s own content caused scores 0, never masked; a reply without a verdict stays masked, counted apart', async () => {
    const outcome = (await store.getOutcome('st', job(0).rollout_id))!;
    const judgeJob: JudgeJob = { ...job(0), outcome };
    const refused = await runJudgeStage(judgeJob, { store, judge: stubJudge({ status: 'refused', reason: 'the judge refused the grading input: HTTP 400: maximum context length' }) });
    expect(refused).toMatchObject({ reward: 0, failure_kind: null, judge_verdict: null, judge_failure: 'refused_input', error: expect.stringMatching(/maximum context length/) });
    const noVerdict = await runJudgeStage(judgeJob, { store, judge: stubJudge({ status: 'failed', kind: 'no_verdict', reason: 'judge reply has no JSON object' }) });
    expect(noVerdict).toMatchObject({ reward: null, failure_kind: 'judge_failed', judge_failure: 'no_verdict' });
    const down = await runJudgeStage(judgeJob, { store, judge: stubJudge({ status: 'failed', kind: 'unavailable', reason: 'judge call failed after 5 attempt(s)' }) });
    expect(down).toMatchObject({ failure_kind: 'judge_failed', judge_failure: 'unavailable' });
  });

  it('results stage: writes the transcript beside the JSONL, commits once, and a masked row is replaced by a score', async () => {
    const file = path.join(path.dirname(env.output), 'stages.jsonl');
    const output = new RunOutput(await store.requireRun('st'), file, store, env.logger);
    await output.open();
    const run = { output, records: new RecordWriter(file, store, env.logger) };
    const task = await store.getTask('st', taskIds[0]);
    const runRecord = await store.requireRun('st');
    const outcome = (await store.getOutcome('st', job(0).rollout_id))!;
    const masked = buildRow(rowContext(runRecord, task, job(0)), outcome, { kind: 'masked', failure: 'judge_failed', error: 'judge down' });
    await store.putTranscriptJudge('st', job(0).rollout_id, { model: 'run-judge', verdict: null, reason: 'no valid verdict', prompt: { system: 's', user: 'u' }, cached: false });
    const first = await commitRow({ v: 1, row: masked }, run);
    expect(first.result).toBe('new');
    expect(first.row.transcript).toBe(`stages_transcripts/${job(0).rollout_id}.json`);
    const record = TranscriptRecordSchema.parse(JSON.parse(readFileSync(path.join(path.dirname(file), first.row.transcript!), 'utf8')));
    expect(record.judge).toMatchObject({ verdict: null, reason: 'no valid verdict' }); // the judge's part merged in
    expect(existsSync(path.join(path.dirname(file), 'stages_transcripts', 'images', `${task.image_sha256}.png`))).toBe(true);
    expect(await store.getTranscriptParts('st', job(0).rollout_id)).toMatchObject({ record: null, judge: null });
    expect((await commitRow({ v: 1, row: masked }, run)).result).toBe('duplicate');
    const scored = buildRow(rowContext(runRecord, task, job(0)), outcome, { kind: 'scored', verdict: 'equivalent', reason: 'same', reward: 1 });
    expect(shouldReplace({ ...masked, transcript: first.row.transcript }, scored)).toBe(true);
    expect(shouldReplace({ ...scored, finished_at: 'x' }, { ...scored, reward: 0 })).toBe(false);
    const second = await commitRow({ v: 1, row: scored }, run);
    expect(second).toMatchObject({ result: 'replaced', row: { reward: 1, transcript: first.row.transcript } });
    await output.close();
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ reward: 1, judge_verdict: 'equivalent' });
  });

  it('parseJob names what is wrong with job data', () => {
    expect(parseJob('rollout', { v: 1, run_id: 'x', task_id: 't', repeat: -1, rollout_id: 'x-t-0' })).toEqual({ ok: false, error: expect.stringMatching(/^malformed rollout job data: repeat: /) });
    expect(parseJob('results', { v: 2, row: {} })).toMatchObject({ ok: false });
    expect(parseJob('rollout', job(0))).toEqual({ ok: true, data: job(0) });
  });

  it('adapter: a poison job fails at once, never retried; a job running at shutdown goes back without spending an attempt', async () => {
    const ends: string[] = [];
    const queue = openQueue('rollout', client, env.prefix, { policy: env.config().queues });
    await queue.drain(); // the run's own rollouts, produced above, are not this test's
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const stage = startStageWorker({
      queue: 'rollout', connection: worker, prefix: env.prefix, concurrency: 2, lockDurationMs: 3000, logger: env.logger,
      onJobEnd: (end) => ends.push(end),
      handle: (_data, ctx) => new Promise((_resolve, reject) => {
        started();
        ctx.signal.addEventListener('abort', () => reject(new Error('aborted by shutdown')));
      }),
    });
    try {
      await queue.add('rollout', { v: 1, nonsense: true } as never, { jobId: 'poison-1', attempts: 3 });
      const poison = await waitFor('the poison job to fail', async () => {
        const j = await queue.getJob('poison-1');
        return (await j?.getState()) === 'failed' ? j : undefined;
      }, 10_000);
      expect(poison!.attemptsMade).toBe(1);
      expect(poison!.failedReason).toMatch(/malformed rollout job data/);
      await enqueue('rollout', queue, { ...job(1), rollout_id: 'st-shutdown-0' });
      await running;
      await stage.close(100);
      const back = await queue.getJob('st-shutdown-0');
      expect(await back!.getState()).toBe('delayed');
      expect(back!.attemptsMade).toBe(0);
      expect(ends).toEqual(['failed', 'requeued']);
    } finally {
      await stage.close(100);
      await queue.close();
    }
  });
  it('results stage: a transcript that cannot be read or written never holds its row back', async () => {
    const file = path.join(path.dirname(env.output), 'bounds.jsonl');
    const output = new RunOutput(await store.requireRun('st'), file, store, env.logger);
    await output.open();
    const run = { output, records: new RecordWriter(file, store, env.logger) };
    const runRecord = await store.requireRun('st');
    const rowOf = async (i: number) => buildRow(rowContext(runRecord, await store.getTask('st', taskIds[i]), job(i)), null, { kind: 'unanswered' });
    // A record that is small gzipped and huge inflated (a gzip bomb): dropped, the row kept.
    await store.putTranscript('st', job(1).rollout_id, gzipSync(Buffer.alloc(200 * 1024 * 1024, 0x20)), new Map());
    const bomb = await commitRow({ v: 1, row: await rowOf(1) }, run);
    expect(bomb).toMatchObject({ result: 'new', row: { transcript: null } });
    expect((await store.getTranscriptParts('st', job(1).rollout_id)).record).toBeNull();
    // A transcript folder that cannot be made (a file is in its way): the row is still committed.
    writeFileSync(path.join(path.dirname(file), 'bounds_transcripts'), 'in the way');
    await store.putTranscript('st', job(2).rollout_id, encodeTranscript(minimalRecord(job(2).rollout_id)), new Map());
    const blocked = await commitRow({ v: 1, row: await rowOf(2) }, run);
    expect(blocked).toMatchObject({ result: 'new', row: { transcript: null } });
    await output.close();
    const ids = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l).rollout_id);
    expect(ids).toEqual(expect.arrayContaining([job(1).rollout_id, job(2).rollout_id]));
  });
});
