/**
 * One live run per output file: a second run naming the JSONL a live run writes is refused at start
 * (the live run and the file named, what to do said, exit 2 from the CLI); the file is free again
 * once the first run ends; a claim left by a dead run ends with its lease.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { runAll } from '../../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../../src/agent/scripted-agent.ts';
import type { AgentRunner } from '../../../src/shared/ports/agent.ts';
import { claimOutput } from '../../../src/shared/stores/output-claim.ts';
import { fleetKeys } from '../../../src/shared/redis/keys.ts';
import { ConfigError } from '../../../src/shared/errors.ts';
import { metricsPathFor } from '../../../src/shared/output/metrics.ts';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, runCli, waitFor, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

const quiet = { update() {}, stop() {} };

describe('the claim of an output file', () => {
  const judge = useScriptedJudge();
  let env: FleetEnv;
  const redis = new Redis(REDIS_URL);
  afterEach(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });
  afterAll(() => redis.disconnect());

  it('refuses a second run on the file a live run writes, naming it; the file is free once that run ends', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const scripted = createScriptedAgent({ '*': { answer: '@gold' } });
    const held: AgentRunner = { ...scripted, run: async (req, signal) => (await gate, scripted.run(req, signal)) };
    let started = false;
    const first = runAll({ config: env.config(['++run_id=first-run']), logger: env.logger, agent: held, progress: quiet, onStart: () => (started = true) });
    await waitFor('the first run to start', () => started, 20_000);

    const second = runAll({ config: env.config(['++run_id=second-run']), logger: env.logger, agent: scripted, progress: quiet });
    const refused = await second.then(() => null, (err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    const message = (refused as Error).message;
    expect(message).toContain('run first-run');
    expect(message).toContain(env.output);
    expect(message).toContain(metricsPathFor(env.output));
    expect(message).toContain(`++output_jsonl_fpath=${env.output.replace(/results\.jsonl$/, 'second-run.jsonl')}`);
    // Nothing of the refused run was made.
    expect(await redis.exists(fleetKeys(env.prefix).run('second-run'))).toBe(0);

    open();
    expect((await first).status).toBe('complete');
    expect(await redis.exists(fleetKeys(env.prefix).outputClaim(env.output))).toBe(0);
    const again = await runAll({ config: env.config(['++run_id=second-run']), logger: env.logger, agent: scripted, progress: quiet });
    expect(again.status).toBe('complete');
  }, 90_000);

  it('exits 2 from the CLI, naming the run that writes the file', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
    const claim = await claimOutput({ redis, prefix: env.prefix, file: env.output, runId: 'live-run', otherOutput: '++output_jsonl_fpath=x.jsonl', logger: env.logger });
    try {
      const res = await runCli(['run', '--run-id', 'late-run', ...env.overrides]);
      expect(res.code).toBe(2);
      expect(res.output).toMatch(/run live-run \(pid \d+ on .+\) is writing/);
      expect(res.output).toContain(env.output);
    } finally {
      await claim.release();
    }
  }, 60_000);

  it('ends with its lease when the run that held it died, and is taken over by a resume of the same run', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
    const key = fleetKeys(env.prefix).outputClaim(env.output);
    // A dead run's claim: nobody refreshes it.
    await redis.set(key, JSON.stringify({ run_id: 'dead-run', host: 'h', pid: 1, token: 't' }), 'PX', 300);
    const base = { redis, prefix: env.prefix, file: env.output, otherOutput: '++output_jsonl_fpath=x.jsonl', logger: env.logger };
    await expect(claimOutput({ ...base, runId: 'next-run' })).rejects.toThrow(/run dead-run/);
    await waitFor('the dead claim to expire', async () => (await redis.exists(key)) === 0, 5_000, 50);
    const claim = await claimOutput({ ...base, runId: 'next-run', ttlMs: 600 });
    // Refreshed while it lives: still there after several leases.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(JSON.parse((await redis.get(key))!).run_id).toBe('next-run');
    const resumed = await claimOutput({ ...base, runId: 'next-run' });
    await claim.release(); // the old holder's release leaves the resume's claim alone
    expect(JSON.parse((await redis.get(key))!).run_id).toBe('next-run');
    await resumed.release();
    expect(await redis.exists(key)).toBe(0);
  }, 30_000);
});
