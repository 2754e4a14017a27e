/**
 * Benchmark 15's simulated sandbox-worker pods, many in one process: each "pod" is what one
 * `vcfleet worker sandbox` pod holds against Redis (its own worker connection, its worker record with
 * a heartbeat, the real sandbox stage worker with `slots` rollouts at once, BullMQ's blocking
 * connection, lock renewal, stall checks and the queue watchdog); only the agent is simulated: the
 * scripted agent after a seeded lognormal delay per rollout (no sandbox, no model; a pod's first
 * rollouts take what is left of one already running, see residualMs). One real judge
 * worker (the no-op judge) per process grades the rollouts. Told over IPC:
 *
 *   { kind: 'scale', pods }  -> start pods until there are `pods`; answers { kind: 'scaled', pods }
 *   { kind: 'stats' }        -> answers { kind: 'stats', ...counters since start }
 *   { kind: 'stop' }         -> closes everything and exits
 *
 * Arguments: <redisUrl> <prefix> <dir> <slots> <medianS> <sigma> <seed> <judgeConcurrency>
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createScriptedAgent } from '../../src/agent/scripted-agent.ts';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import { createRedis, resolveRedisEndpoint, type Redis } from '../../src/shared/redis/connect.ts';
import { announceWorker, type WorkerPresence } from '../../src/shared/queue/worker-registry.ts';
import type { StageWorker } from '../../src/shared/queue/stage-worker.ts';
import { startJudgeWorker } from '../../src/workers/judge/worker.ts';
import { startSandboxWorker, type SandboxWorker } from '../../src/workers/sandbox/worker.ts';
import { benchConfig, discardLogger, noopJudge } from '../lib/fleet.ts';
import { lognormalSamples } from '../lib/stats.ts';

export type PodsMessage =
  | { kind: 'ready' }
  | { kind: 'scaled'; pods: number }
  | { kind: 'stats'; pods: number; renewCalls: number; locksRenewed: number; rollouts: number; errors: number; lastError: string };

const [redisUrl, prefix, dir, slotsArg, medianArg, sigmaArg, seedArg, judgeArg] = process.argv.slice(2);
const slots = Number(slotsArg);
const [medianS, sigma, seed] = [Number(medianArg), Number(sigmaArg), Number(seedArg)];
const config = benchConfig({
  redisUrl, dir,
  overrides: [`++queues.rollout_concurrency=${slots}`, '++queues.rollout_global_concurrency=1000000', `++judge.concurrency=${judgeArg}`],
}, prefix);
const endpoint = resolveRedisEndpoint(config);
const logger = discardLogger('info');
const scripted = createScriptedAgent({ '*': { answer: '@gold', turns: 6, tool_calls: 5, input_tokens: 40000, output_tokens: 3000 } });
const counts = { renewCalls: 0, locksRenewed: 0, rollouts: 0, errors: 0, lastError: '' };

const hashOf = (rolloutId: string) => createHash('sha256').update(`${seed}:${rolloutId}`).digest();

/** A rollout's duration, seeded by its id: the same rollout takes the same time in every run. */
function durationMs(rolloutId: string): number {
  return Math.max(1, Math.round(lognormalSamples(1, medianS, sigma, hashOf(rolloutId).readUInt32LE(0))[0] * 1000));
}

/**
 * What is left of a rollout found running when a long-running fleet is looked at: a uniform share of
 * a length-biased duration (for a lognormal, the median times exp(sigma^2)). A pod's first rollouts
 * take these, so a step is at its steady rate of completions from the start instead of all its
 * rollouts starting (and ending) together.
 */
function residualMs(rolloutId: string): number {
  const h = hashOf(rolloutId);
  const whole = lognormalSamples(1, medianS * Math.exp(sigma * sigma), sigma, h.readUInt32LE(0))[0];
  return Math.max(1, Math.round((h.readUInt32LE(4) / 2 ** 32) * whole * 1000));
}

/** The scripted agent after a realistic time; its sessions are not on this host (as with OpenSandbox). One per pod. */
function podAgent(): AgentRunner {
  let fresh = slots;
  return {
    host: { usesHostMemory: false, maxLifetimeS: null },
    async run(request, signal) {
      const ms = fresh > 0 ? (fresh--, residualMs(request.rolloutId)) : durationMs(request.rolloutId);
      await sleep(ms, undefined, { signal });
      counts.rollouts++;
      return scripted.run(request, signal);
    },
    close: async () => {},
  };
}

interface Pod {
  connection: Redis;
  presence: WorkerPresence;
  worker: SandboxWorker;
}

const pods: Pod[] = [];
const judgeConnection = createRedis(endpoint, 'worker');
let judge: StageWorker<'judge'> | null = null;

async function startPod(): Promise<Pod> {
  const connection = createRedis(endpoint, 'worker');
  const presence = await announceWorker(connection, prefix, 'sandbox');
  const worker = await startSandboxWorker({ config, connection, logger, agent: podAgent(), workerName: presence.id });
  const bull = worker.worker;
  bull.on('locksRenewed', ({ count }: { count: number }) => {
    counts.renewCalls++;
    counts.locksRenewed += count;
  });
  bull.on('error', (err: Error) => {
    counts.errors++;
    counts.lastError = err.message;
  });
  return { connection, presence, worker };
}

async function scale(target: number): Promise<void> {
  // A few at a time: each pod's first commands load BullMQ's scripts and read the run.
  while (pods.length < target) {
    const batch = Math.min(25, target - pods.length);
    pods.push(...(await Promise.all(Array.from({ length: batch }, () => startPod()))));
  }
}

let stopping: Promise<void> | null = null;
const stop = (): Promise<void> => (stopping ??= closeAll());

async function closeAll(): Promise<void> {
  await Promise.all(pods.map(async (p) => {
    await p.worker.close(0).catch(() => undefined);
    await p.presence.stop();
    p.connection.disconnect();
  }));
  await judge?.close(0).catch(() => undefined);
  judgeConnection.disconnect();
}

const send = (m: PodsMessage) => process.send!(m);
process.on('message', (raw) => {
  const m = raw as { kind: string; pods?: number };
  if (m.kind === 'scale') void scale(m.pods!).then(() => send({ kind: 'scaled', pods: pods.length }), (err: Error) => {
    process.stderr.write(`sizing-pods: could not start pods: ${err.stack}\n`);
    process.exit(1);
  });
  else if (m.kind === 'stats') send({ kind: 'stats', pods: pods.length, ...counts });
  else if (m.kind === 'stop') void stop().finally(() => process.exit(0));
});
// Gone with the benchmark (its process ended or was killed): end too, not linger against a Redis that is gone.
process.on('disconnect', () => void stop().finally(() => process.exit(0)));
judge = await startJudgeWorker({ config, connection: judgeConnection, logger, judge: noopJudge });
send({ kind: 'ready' });
