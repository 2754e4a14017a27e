/**
 * Bad input and a bad output path, as a user meets them: through the real CLI (exit code and
 * message), and huge or control-character text through a whole in-process run.
 * The unit tests of test/prepare and test/shared/config/load.test.ts cover the parsing itself; here each case
 * goes through a command a user types (`run`, `worker`, `produce`).
 */
import { writeFileSync, readFileSync, truncateSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runAll } from '../../src/all-in-one/run-all.ts';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import { QUESTION_MAX_CHARS, RESPONSE_TAIL_CHARS } from '../../src/workers/judge/prompt.ts';
import { writeFixtureParquet } from '../helpers/fixture-parquet.ts';
import { FAKE_JUDGE_KEY, REDIS_URL, runCli, startCli, waitFor } from '../helpers/fleet.ts';
import { deletePrefix } from '../helpers/redis-keys.ts';
import { createTmpDir } from '../helpers/tmp.ts';
import { countLines, expectedRewards, expectOneRowEach, expectRewards, readJsonl } from './fault-helpers.ts';
import { faultFleet } from './fault-fleet.ts';

const quiet = { update() {}, stop() {} };
const CONTROL = '\u0000\u0001\u0007\u001b[31m\u007f\u2028\u2029\r\u000b\ud83d\ude00';

describe('bad input through the CLI and the fleet', () => {
  const f = faultFleet();

  /** `vcfleet <args>` pointed at a fresh folder and prefix (removed after), the scripted judge; returns exit code and output. */
  async function cli(args: string[], extra: string[] = []) {
    const dir = createTmpDir('vcfleet-badin-');
    const prefix = `vcftest-badin-${path.basename(dir)}`;
    const base = [`++data_dir=${path.join(dir, 'data')}`, `++output_jsonl_fpath=${path.join(dir, 'out.jsonl')}`, `++redis_url=${REDIS_URL}`,
      `++queues.prefix=${prefix}`, '++agent.kind=scripted', `++state_dir=${path.join(dir, 'state')}`,
      `++visual_coding_opencode_judge_base_url=${f.judge.url}`, `++judge.api_key=${FAKE_JUDGE_KEY}`, '++preflight.require_redis_persistence=false'];
    try {
      return { dir, ...(await runCli([...args, ...base, ...extra])) };
    } finally {
      await deletePrefix(f.redis, prefix);
    }
  }

  it('a truncated parquet: `vcfleet run` exits 2 naming the file', async () => {
    const dir = createTmpDir('vcfleet-trunc-');
    const fx = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 6 });
    truncateSync(fx.path, Math.floor(statSync(fx.path).size / 2));
    const res = await cli(['run', '--run-id', 'trunc'], [`++babyvision_parquet=${fx.path}`]);
    expect(res.code, res.output).toBe(2);
    expect(res.output).toContain(fx.path);
    expect(res.output).not.toMatch(/at .*\.ts:\d+/); // a message, not a stack trace
  });

  it('a wrong SHA-256 pin: `vcfleet produce` exits 2 with both hashes and the fix', async () => {
    const dir = createTmpDir('vcfleet-sha-');
    const fx = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: 4 });
    const wrong = 'ab'.repeat(32);
    const res = await cli(['produce', '--run-id', 'sha'], [`++babyvision_parquet=${fx.path}`, `++babyvision.sha256=${wrong}`]);
    expect(res.code, res.output).toBe(2);
    expect(res.output).toContain(wrong);
    expect(res.output).toContain(fx.sha256);
  });

  it('an image that is not an image: exits 2 naming the task', async () => {
    const dir = createTmpDir('vcfleet-img-');
    const fx = writeFixtureParquet(path.join(dir, 'bv.parquet'), {
      rows: 4,
      mutate: (rows) => {
        rows[2].image = { bytes: new TextEncoder().encode('<html>this is not a picture</html>'), path: 'x.png' };
        return rows;
      },
    });
    const res = await cli(['run', '--run-id', 'img'], [`++babyvision_parquet=${fx.path}`]);
    expect(res.code, res.output).toBe(2);
    expect(res.output).toContain(fx.rows[2].taskId!);
    expect(res.output).toMatch(/image/i);
  });

  it('invalid config values: every role exits 2 naming the key and where the value came from', async () => {
    const worker = await cli(['worker', 'sandbox'], ['++queues.rollout_concurrency=0']);
    expect(worker.code).toBe(2);
    expect(worker.output).toContain('config key "queues.rollout_concurrency"');
    expect(worker.output).toContain('command line ++queues.rollout_concurrency=0');
    const run = await cli(['run'], ['++policy_base_url=not a url', '++judge.max_retries=-1']);
    expect(run.code).toBe(2);
    expect(run.output).toContain('config key "policy_base_url"');
    expect(run.output).toContain('config key "judge.max_retries"');
    const typo = await cli(['worker', 'judge'], ['++judge.max_retires=3']);
    expect(typo.code).toBe(2);
    expect(typo.output).toContain('unknown config key "judge.max_retires"');
  });

  it('megabytes of text and control characters in a question and an answer: rows written, JSONL valid, judge prompt cut', async () => {
    const hugeQuestion = `Count the dots.${CONTROL}${'x'.repeat(1_000_000)}\u0000end`;
    const env = await f.env({ rows: 4, fixture: { mutate: (rows) => { rows[0].question = hugeQuestion; return rows; } },
    });
    const t1 = env.fixture.expected[1];
    const script = {
      '*': { answer: '@gold' },
      [t1.task_id]: { answer: '@gold', text: `${CONTROL}${'y'.repeat(3 * 1024 * 1024)}${CONTROL} so \\boxed{${t1.gold}}` },
    };
    const started = f.judge.requests.length;
    const result = await runAll({ config: env.config(['++run_id=big']), logger: env.logger, agent: createScriptedAgent(script), progress: quiet });
    expect(result.status).toBe('complete');
    const rows = readJsonl(env.output);
    expectOneRowEach(rows, 'big', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
    const requests = f.judge.requests.slice(started);
    expect(requests.length).toBe(4);
    for (const r of requests) {
      expect([...(r.fields.question ?? '')].length).toBeLessThanOrEqual(QUESTION_MAX_CHARS);
      expect([...(r.fields.responseEnd ?? '')].length).toBeLessThanOrEqual(RESPONSE_TAIL_CHARS);
      expect(r.rawBody.length).toBeLessThan(40_000);
    }
    expect(requests.some((r) => r.fields.question?.startsWith('Count the dots.'))).toBe(true);
    // The output file stays small: the text lives in the judge job's tail (4000 characters), not in rows.
    expect(readFileSync(env.output).length).toBeLessThan(50_000);
  });

  it('an output path whose folder is a file: a clear error in the consumer log, nothing lost, all rows after the fix', async () => {
    const script = { '*': { answer: '@gold' }, 'bv-003': { answer: 'no' } };
    const env = await f.env({ rows: 6, script });
    const blocker = path.join(env.dir, 'blocked');
    writeFileSync(blocker, 'a file where the output folder should be\n');
    const output = path.join(blocker, 'results.jsonl');
    const args = [...env.overrides, `++output_jsonl_fpath=${output}`];
    expect((await runCli(['produce', '--run-id', 'wr', ...args])).code).toBe(0);
    f.procs.push(startCli(['worker', 'sandbox', ...args]), startCli(['worker', 'judge', ...args]));
    const consumer = startCli(['worker', 'results', ...args]);
    f.procs.push(consumer);
    await waitFor('the write error in the consumer log', () => consumer.output().includes(`cannot write ${output}`), 60_000, 100);
    const line = consumer.output().split('\n').find((l) => l.includes(`cannot write ${output}`))!;
    expect(line).toMatch(/EEXIST|ENOTDIR/);
    expect(line).toContain('make its folder exist and be writable');
    expect(line).toContain('the rows are safe in Redis');
    // Nothing lost: every row still waits in the results queue.
    const results = openQueue('results', f.redis, env.prefix);
    await waitFor('6 results jobs held', async () => {
      const c = await results.getJobCounts('waiting', 'delayed', 'active', 'failed', 'completed');
      return c.waiting + c.delayed + c.active === 6;
    }, 60_000, 200);
    await results.close();
    consumer.child.kill('SIGTERM');
    expect(await consumer.exited).toBe(0);
    rmSync(blocker);
    const again = startCli(['worker', 'results', ...args]);
    f.procs.push(again);
    await waitFor('6 rows after the fix', () => countLines(output) >= 6, 90_000, 250);
    const rows = readJsonl(output);
    expectOneRowEach(rows, 'wr', env.fixture);
    expectRewards(rows, expectedRewards(env.fixture, script));
  });
});
