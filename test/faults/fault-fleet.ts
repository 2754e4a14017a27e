/**
 * The set-up every fault test shares: a scripted judge server, a Redis client, the fleet environment
 * of the current test, the `vcfleet` processes it started, and the clean-up after each test (kill
 * what still runs, check no process printed a key, remove the prefix's keys and the temp folders).
 */
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { Redis } from 'ioredis';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../helpers/scripted-judge-server.ts';
import { FAKE_JUDGE_KEY, FAKE_POLICY_KEY, makeFleetEnv, REDIS_URL, startCli, type CliProcess, type FleetEnv, type FleetEnvOptions } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';
import { killAll } from './fault-helpers.ts';

export interface FaultFleet {
  judge: ScriptedJudgeServer;
  redis: Redis;
  /** The environment of the running test (set by `env()`), removed after it. */
  current: FleetEnv | undefined;
  procs: CliProcess[];
  /** A fleet environment pointed at this judge. */
  env(options?: Omit<FleetEnvOptions, 'judgeUrl'>): Promise<FleetEnv>;
  /** `vcfleet <args>` as its own process, stopped after the test. */
  start(args: string[], extraEnv?: Record<string, string>): CliProcess;
}

/** Call at the top of a `describe`: registers the hooks and returns the shared fixture. */
export function faultFleet(): FaultFleet {
  const f = { procs: [] as CliProcess[], current: undefined as FleetEnv | undefined } as FaultFleet;
  f.env = async (options = {}) => (f.current = await makeFleetEnv({ ...options, judgeUrl: f.judge.url }));
  f.start = (args, extraEnv = {}) => {
    const p = startCli(args, extraEnv);
    f.procs.push(p);
    return p;
  };
  beforeAll(async () => {
    f.judge = await startScriptedJudgeServer();
    f.redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await f.judge.close();
    f.redis.disconnect();
  });
  afterEach(async () => {
    await killAll(f.procs);
    for (const p of f.procs) for (const key of [FAKE_JUDGE_KEY, FAKE_POLICY_KEY]) expect(p.output()).not.toContain(key);
    f.procs.length = 0;
    await f.current?.cleanup();
    f.current = undefined;
    f.judge.setScript([]);
    removeTmpDirs();
  });
  return f;
}
