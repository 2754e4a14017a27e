/**
 * The judge cache across runs, through the whole fleet (runAll on the session's Redis, the real judge
 * client against a scripted judge server): a run whose judge is dead is not graded from verdicts
 * another judge gave another run; a run of the same judge is, and says how many (`judge_cached` rows,
 * `judge_cache_hits` in the metrics, the summary and `status`); `judge.cache=false` is the run's own
 * setting; `rejudge --no-cache` calls the judge.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { runAll } from '../../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../../src/agent/scripted-agent.ts';
import { rejudge } from '../../../src/ops/requeue.ts';
import { runStatus } from '../../../src/ops/run-status.ts';
import { RowSchema, type Row } from '../../../src/shared/records/rows.ts';
import { metricsRows } from '../../../src/cli/metrics-table.ts';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };
const agent = createScriptedAgent({ '*': { answer: '@gold' } });
/** A judge endpoint nothing listens on. */
const DEAD_JUDGE = '++visual_coding_opencode_judge_base_url=http://127.0.0.1:1/v1';

function rowsOf(file: string): Row[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
}

describe('the judge cache across runs', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  afterEach(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });

  it('a run whose judge is dead is not graded from verdicts another judge gave another run', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url });
    const first = await runAll({ config: env.config(['++run_id=graded', '++output_jsonl_fpath=graded.jsonl', `++output_root=${env.dir}`]), logger: env.logger, agent, progress: quiet });
    expect(first.status).toBe('complete');
    expect(first.metrics?.num_scored).toBe(3);
    // Same judge model name, same tasks and answers; its judge is another endpoint, and dead.
    const dead = await runAll({
      config: env.config(['++run_id=dead-judge', DEAD_JUDGE, '++preflight.enabled=false', '++queues.judge_attempts=1']), logger: env.logger, agent, progress: quiet,
    });
    const rows = rowsOf(env.output);
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.failure_kind === 'judge_failed' && r.reward === null && !r.judge_cached)).toBe(true);
    expect(dead.metrics?.judge_cache_hits).toBe(0);
    expect(dead.masked).toBe(3);
  }, 90_000);

  it('a run of the same judge is graded from the cache and counts it; judge.cache=false and rejudge --no-cache call the judge', async () => {
    env = await makeFleetEnv({ rows: 3, judgeUrl: judge.url });
    judge.requests.length = 0;
    const out = (name: string) => [`++run_id=${name}`, `++output_jsonl_fpath=${name}.jsonl`, `++output_root=${env.dir}`];
    await runAll({ config: env.config(out('first')), logger: env.logger, agent, progress: quiet });
    expect(judge.requests).toHaveLength(3);

    const again = await runAll({ config: env.config(out('again')), logger: env.logger, agent, progress: quiet });
    expect(judge.requests).toHaveLength(3); // no call: every verdict from the cache
    expect(again.metrics?.judge_cache_hits).toBe(3);
    expect(again.metrics?.tokens?.judge).toEqual({ input: 0, output: 0 });
    expect(rowsOf(again.outputPath).every((r) => r.judge_cached)).toBe(true);
    expect(metricsRows(again.metrics!).map((r) => r.join(' '))).toContain('judge cache 3 verdict(s) from the cache (no judge call, no judge tokens)');
    const redis = new Redis(REDIS_URL);
    try {
      expect((await runStatus(redis, env.prefix, 'again')).judge_cache_hits).toBe(3);

      // The run's own setting, carried by its record: its judge is called for every verdict.
      const own = await runAll({ config: env.config([...out('own'), '++judge.cache=false']), logger: env.logger, agent, progress: quiet });
      expect(judge.requests).toHaveLength(6);
      expect(own.metrics?.judge_cache_hits).toBe(0);
      expect((await runStatus(redis, env.prefix, 'own')).judge_cache_hits).toBe(0);

      // rejudge --no-cache: a run that may use the cache has its judge_failed rows graded by calls.
      const failing = await runAll({
        config: env.config([...out('failing'), DEAD_JUDGE, '++preflight.enabled=false', '++queues.judge_attempts=1']), logger: env.logger, agent, progress: quiet,
      });
      expect(failing.masked).toBe(3);
      const { sent } = await rejudge(redis, env.prefix, 'failing', env.logger, env.config().queues, { noCache: true });
      expect(sent).toBe(3);
      // Finished by a judge-worker of the live judge (this host's endpoint), as `rejudge` does it.
      const finished = await runAll({ config: env.config(['++run_id=failing', `++output_root=${env.dir}`]), logger: env.logger, progress: quiet, requeued: { roles: new Set(['judge', 'results']) } });
      expect(finished.status).toBe('complete');
      expect(judge.requests).toHaveLength(9);
      expect(finished.metrics?.judge_cache_hits).toBe(0);
    } finally {
      redis.disconnect();
    }
  }, 120_000);
});
