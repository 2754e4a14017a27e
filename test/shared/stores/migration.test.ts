/**
 * What an older vcfleet left in Redis and on disk is still read: a judge job and a kept outcome in the
 * first outcome shape (the "rollout summary": no `response_truncated`, no `forged_calls`), a row line
 * without the fields added since, a transcript record with the first, short `outcome`, and a run record
 * whose settings lack the settings added since. The fixtures are written exactly as vcfleet 0.1.0
 * (commit 814083b) wrote them. A judge worker takes the old job and makes its row.
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../../src/shared/logger.ts';
import { openQueue, parseJob } from '../../../src/shared/queue/registry.ts';
import { RowSchema } from '../../../src/shared/records/rows.ts';
import { parseRunSettings } from '../../../src/shared/config/run-settings.ts';
import { RunStore } from '../../../src/shared/stores/run-store.ts';
import { decodeTranscript } from '../../../src/shared/records/transcript-codec.ts';
import type { Judge } from '../../../src/shared/ports/judge.ts';
import { startJudgeWorker } from '../../../src/workers/judge/worker.ts';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { REDIS_URL, waitFor } from '../../helpers/fleet.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';

/** The outcome as 0.1.0 kept it and sent it in judge jobs. */
const OLD_OUTCOME = {
  stop_reason: 'answered', extracted_answer: 'B', response_tail: 'The answer is \\boxed{B}.', turns: 2, tool_calls: 1,
  input_tokens: 900, output_tokens: 40, wall_s: 12.5, error: null, limit_hits: {}, refused_requests: {},
};
const OLD_JUDGE_JOB = { v: 1 as const, run_id: 'old-run', task_id: 'task-1', repeat: 0, rollout_id: 'old-run-task-1-0', outcome: OLD_OUTCOME };
const OLD_ROW = {
  row_version: 1, run_id: 'old-run', rollout_id: 'old-run-task-1-0', task_id: 'task-1', repeat: 0, benchmark: 'babyvision_opencode', type: 'T', subtype: 'S',
  ans_type: 'choice', expected_answer: 'B', extracted_answer: 'B', reward: 1, judge_verdict: 'equivalent', judge_reason: 'same', stop_reason: 'answered',
  failure_kind: null, turns: 2, tool_calls: 1, input_tokens: 900, output_tokens: 40, wall_s: 12.5, policy_model: 'p', judge_model: 'j', error: null,
  finished_at: '2026-11-20T10:00:00.000Z', limit_hits: {}, refused_requests: {}, transcript: null,
};
const OLD_TRANSCRIPT = {
  transcript_version: 1, run_id: 'old-run', rollout_id: 'old-run-task-1-0', task_id: 'task-1', repeat: 0, attempt: 1, benchmark: 'babyvision_opencode', policy_model: 'p',
  task: { prompt: 'p', question: 'q', gold: 'B', ans_type: 'choice', type: 'T', subtype: 'S', options: [], image_sha256: 'a'.repeat(64) },
  started_at: '2026-11-20T10:00:00.000Z', wall_s: 12.5, turns: [],
  outcome: { stop_reason: 'answered', extracted_answer: 'B', error: null, limit_hits: {}, refused_requests: {} },
  judge: null, agent: null, image_mimes: {}, truncated: [],
};
/** Run settings as 0.1.0 froze them (settings_version 1). */
const OLD_SETTINGS = {
  settings_version: 1, benchmark: 'babyvision_opencode', num_repeats: 1, limit: null, task_timeout_s: 1800,
  policy: { model_name: 'p', context_window: 128000, max_output_tokens: 32768, request_timeout_s: 600, capture: false, endpoint: null, max_request_mib: 256, max_concurrent_calls: 4, max_calls_per_rollout: 1000 },
  judge: { model_name: 'j', temperature: 0, max_tokens: 1024 }, agent: { max_tool_calls: 200 }, transcripts: { enabled: true, max_image_mib: 32 },
};

describe('data an older vcfleet left behind', () => {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const prefix = `vcftest-${randomBytes(4).toString('hex')}`;
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('parses the old shapes with today\'s defaults', () => {
    const job = parseJob('judge', OLD_JUDGE_JOB);
    expect(job.ok).toBe(true);
    if (job.ok) expect(job.data.outcome).toMatchObject({ ...OLD_OUTCOME, response_truncated: false, forged_calls: 0 });
    expect(RowSchema.parse(OLD_ROW)).toMatchObject({ ...OLD_ROW, forged_calls: 0, judge_failure: null });
    expect(decodeTranscript(gzipSync(JSON.stringify(OLD_TRANSCRIPT))).outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', turns: 0, forged_calls: 0 });
    const settings = parseRunSettings('old-run', OLD_SETTINGS);
    // Version 1 kept the two model names inside their sections; today each setting is under its config key.
    const { policy: { model_name: _policyModel, ...policy }, judge: { model_name: _judgeModel, ...judge }, ...rest } = OLD_SETTINGS;
    expect(settings).toMatchObject({ ...rest, settings_version: 2, policy_model_name: 'p', policy, visual_coding_opencode_judge_model_name: 'j', judge });
    expect(settings.policy).not.toHaveProperty('model_name');
    // A run produced before token capture: off, nothing pinned, no weight version; its rows have neither field.
    expect(settings.policy).toMatchObject({ token_capture: false, sampling: {}, weight_version: null });
    expect(RowSchema.parse(OLD_ROW)).toMatchObject({ token_capture: null, trajectory: null });
    // A setting a record does not have (added after it was written) takes its default: no new version needed.
    const { transcripts: _dropped, ...older } = OLD_SETTINGS;
    expect(parseRunSettings('older-run', { ...older, policy: { model_name: 'p' } })).toMatchObject({ transcripts: { enabled: true, max_image_mib: 32 }, policy_model_name: 'p', policy: { max_calls_per_rollout: 1000 } });
    expect(parseRunSettings('newer-run', { settings_version: 2, policy_model_name: 'q' })).toMatchObject({ policy_model_name: 'q', visual_coding_opencode_judge_model_name: 'gpt-4o-mini', judge: { max_tokens: 1024 } });
  });

  it('a kept outcome and a judge job still in Redis are read, and the judge worker makes the old job\'s row', async () => {
    const store = new RunStore(redis, prefix);
    const config = ConfigSchema.parse({ queues: { prefix } });
    const record = {
      run_id: 'old-run', benchmark: 'babyvision_opencode', created_at: '2026-11-20T09:00:00.000Z', num_tasks: 1, num_repeats: 1, total: 1,
      output_jsonl_fpath: 'results/old-run.jsonl', policy_model: 'p', judge_model: 'j', settings: OLD_SETTINGS,
    };
    await redis.hset(store.keys.run('old-run'), 'record', JSON.stringify(record));
    const task = { task_id: 'task-1', benchmark: 'babyvision_opencode', prompt: 'p', question: 'q', gold: 'B', type: 'T', subtype: 'S', ans_type: 'choice', options: [], image_sha256: 'a'.repeat(64), image_mime: 'image/png', image_file: 'images/a.png' };
    await redis.hset(store.keys.tasks('old-run'), 'task-1', JSON.stringify(task));
    await redis.hset(store.keys.outcomes('old-run'), 'old-run-task-1-0', JSON.stringify(OLD_OUTCOME));
    expect(await store.getOutcome('old-run', 'old-run-task-1-0')).toMatchObject({ ...OLD_OUTCOME, forged_calls: 0 });
    // The job as 0.1.0 added it, straight into the queue.
    const judgeQueue = openQueue('judge', redis, prefix);
    await (judgeQueue as unknown as { add(n: string, d: unknown, o: unknown): Promise<unknown> }).add('judge', OLD_JUDGE_JOB, { jobId: 'old-run-task-1-0-judge-old' });
    const judge: Judge = { modelName: 'j', grade: async () => ({ status: 'scored', verdict: 'equivalent', reason: 'same', reward: 1, cached: false }), close: async () => {} };
    const worker = await startJudgeWorker({ config, connection: redis, logger: createLogger({ level: 'silent' }), judge });
    const results = openQueue('results', redis, prefix);
    try {
      const rows = await waitFor('the row of the old job', async () => {
        const jobs = await results.getJobs(['waiting']);
        return jobs.length ? jobs.map((j) => j.data.row) : undefined;
      }, 20_000);
      expect(rows[0]).toMatchObject({ rollout_id: 'old-run-task-1-0', reward: 1, judge_verdict: 'equivalent', extracted_answer: 'B', forged_calls: 0 });
    } finally {
      await worker.close();
      await Promise.all([judgeQueue.close(), results.close()]);
    }
  });
});
