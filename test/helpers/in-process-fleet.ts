/**
 * The one way tests run a fleet inside the test process: the three stage workers on a worker
 * connection of the session's Redis, a client connection for producing and reading, and one close
 * that stops every stage (last started, first stopped) and drops both connections. Each stage takes
 * the configuration of the test's FleetEnv unless given another (a run of its own, say).
 */
import type { Config } from '../../src/shared/config/load.ts';
import { createRedis, type Redis } from '../../src/shared/redis/connect.ts';
import type { AgentRunner } from '../../src/shared/ports/agent.ts';
import type { StageWorker } from '../../src/shared/queue/stage-worker.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import { produceRun, type ProduceResult } from '../../src/producer/produce.ts';
import { createFleetJudge } from '../../src/workers/judge/judge-factory.ts';
import { startJudgeWorker } from '../../src/workers/judge/worker.ts';
import { startResultsWorker, type ResultsWorker } from '../../src/workers/results/worker.ts';
import { startSandboxWorker, type SandboxWorker } from '../../src/workers/sandbox/worker.ts';
import { REDIS_URL, type FleetEnv } from './fleet.ts';

export interface InProcessFleet {
  /** The stages' connection (retries forever, as a worker's does). */
  worker: Redis;
  /** A client connection (fails fast): produce with it, read queues with it. */
  client: Redis;
  /** Start a sandbox-worker stage running `agent`. */
  sandbox(agent: AgentRunner, config?: Config): Promise<SandboxWorker>;
  /** Start a judge-worker stage with the fleet's judge of `config`. */
  judge(config?: Config): Promise<StageWorker>;
  /** Start the results consumer; resolves once it takes rows. */
  results(config?: Config): Promise<ResultsWorker>;
  /** Enqueue the run of `config` over the env's prepared fixture. */
  produce(config?: Config): Promise<ProduceResult>;
  /** Stop one stage now (it is not stopped again at close). */
  stop(stage: StageWorker | ResultsWorker, graceMs?: number): Promise<void>;
  close(): Promise<void>;
}

export function startInProcessFleet(env: FleetEnv, base: Config = env.config()): InProcessFleet {
  const worker = createRedis(REDIS_URL, 'worker');
  const client = createRedis(REDIS_URL, 'client');
  const stages: Array<StageWorker | ResultsWorker> = [];
  const started = <T extends StageWorker | ResultsWorker>(stage: T): T => (stages.push(stage), stage);
  const logger = env.logger;
  return {
    worker, client,
    sandbox: async (agent, config = base) => started(await startSandboxWorker({ config, connection: worker, logger, agent })),
    judge: async (config = base) => started(await startJudgeWorker({ config, connection: worker, logger, judge: createFleetJudge(config, logger, worker) })),
    async results(config = base) {
      const results = started(startResultsWorker({ config, connection: worker, logger }));
      await results.ready;
      return results;
    },
    async produce(config = base) {
      const bench = await loadOrPrepare(config, logger);
      return produceRun({ config, redis: client, logger, tasks: bench.tasks, readImage: bench.readImage });
    },
    async stop(stage, graceMs = 1000) {
      const i = stages.indexOf(stage);
      if (i >= 0) stages.splice(i, 1);
      await stage.close(graceMs);
    },
    async close() {
      let first: unknown;
      for (const stage of stages.splice(0).reverse()) await stage.close(1000).catch((err: unknown) => (first ??= err));
      worker.disconnect();
      client.disconnect();
      if (first) throw first;
    },
  };
}
