/**
 * Prometheus metrics of one fleet process: a fresh prom-client `Registry` per process (never the
 * global default one), filled through the hooks the stages already expose (`onJobEnd`, `onCommit`)
 * and through thin wrappers around the agent runner and the judge. Queue depths are read from Redis
 * on scrape.
 *
 * Metric names
 * - `vcfleet_jobs_total{queue,outcome}`: jobs ended by this process (completed | failed | requeued).
 * - `vcfleet_stage_duration_seconds{queue,outcome}`: how long a job of a stage took.
 * - `vcfleet_active_sandboxes`: rollouts running in this process now.
 * - `vcfleet_rollouts_total{result}`: agent runs by stop reason, or `infra_error`.
 * - `vcfleet_sandbox_limit_hits_total{limit}`: times sandboxes hit their memory, pids or disk limit.
 * - `vcfleet_gateway_refusals_total{reason}`: sandbox requests the policy gateway refused.
 * - `vcfleet_judge_calls_total{outcome,verdict,cached}`: judge gradings (scored | refused | failed | error).
 * - `vcfleet_rows_committed_total{result,kind}`: rows the results consumer wrote.
 * - `vcfleet_queue_jobs{queue,state,prefix}`: jobs per queue and state under the fleet's key prefix, read on scrape.
 * - `vcfleet_serve_pending{run_id}`, `vcfleet_serve_pending_image_bytes{run_id}`,
 *   `vcfleet_serve_refused_total{run_id,reason}`: the bound of `vcfleet serve` runs, read on scrape (serve-gauges.ts).
 * - `vcfleet_sandbox_slots`: rollouts this sandbox-worker runs at once (a number, or what `auto` found).
 * - `vcfleet_sandbox_admission_held`: 1 while the worker takes no rollouts because its host has no room.
 * - `vcfleet_sandbox_admission_holds_total`: times it held off.
 * - `vcfleet_policy_concurrency` / `vcfleet_policy_concurrency_cap`: sessions this sandbox-worker runs at once
 *   against its policy endpoint now (adaptive concurrency), and its cap.
 * - `vcfleet_policy_pushbacks_total`, `vcfleet_policy_pushbacks_last_minute`: 429s (and 503s with Retry-After)
 *   the endpoint answered the agent's calls, which the gateway held and sent again.
 * - `vcfleet_worker_stalls_recovered_total{queue}`: times a worker of this process sat idle with jobs waiting
 *   in its queue (after a Redis failover) and its queue watchdog renewed it.
 * - `vcfleet_policy_wait_share`: share of the last minute's session time spent waiting on the endpoint (0..1).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AdmissionState, FleetMetrics, PaceState } from '../shared/ports/telemetry.ts';
import { createQueueDepthGauge, type QueueDepthSource } from './queue-depth.ts';
import { createServeGauges } from './serve-gauges.ts';

export interface FleetMetricsOptions {
  /** Added to every series as `role` (sandbox, judge, results, run, dashboard). */
  role?: string;
}

/** Seconds buckets from a fast results commit up to a 30-minute rollout. */
const DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/** The series of a sandbox-worker's admission by memory, and the hook that sets them. */
function admissionMetrics(registers: Registry[]): (state: AdmissionState) => void {
  const slots = new Gauge({ name: 'vcfleet_sandbox_slots', help: 'Rollouts this sandbox-worker runs at once.', registers });
  const held = new Gauge({ name: 'vcfleet_sandbox_admission_held', help: '1 while this sandbox-worker takes no rollouts because its host has no memory to spare.', registers });
  const holds = new Counter({ name: 'vcfleet_sandbox_admission_holds_total', help: 'Times this sandbox-worker held off taking rollouts for lack of memory.', registers });
  let holdsSeen = 0;
  return (state) => {
    slots.set(state.slots);
    held.set(state.held === null ? 0 : 1);
    if (state.holds > holdsSeen) holds.inc(state.holds - holdsSeen);
    holdsSeen = state.holds;
  };
}

/** The series of a sandbox-worker's pace against its policy endpoint, and the hook that sets them. */
function paceMetrics(registers: Registry[]): (state: PaceState) => void {
  const concurrency = new Gauge({ name: 'vcfleet_policy_concurrency', help: 'Sessions this sandbox-worker runs at once against its policy endpoint now (adaptive concurrency).', registers });
  const cap = new Gauge({ name: 'vcfleet_policy_concurrency_cap', help: 'Most sessions this sandbox-worker runs at once (its slots).', registers });
  const total = new Counter({ name: 'vcfleet_policy_pushbacks_total', help: "429s (and 503s with Retry-After) the policy endpoint answered the agent's calls; held and sent again.", registers });
  const lastMin = new Gauge({ name: 'vcfleet_policy_pushbacks_last_minute', help: 'Push-backs of the policy endpoint in the last minute.', registers });
  const share = new Gauge({ name: 'vcfleet_policy_wait_share', help: "Share of the last minute's session time spent waiting on the policy endpoint (0..1).", registers });
  let seen = 0;
  return (state) => {
    concurrency.set(state.concurrency);
    cap.set(state.cap);
    lastMin.set(state.pushbacksLastMin);
    share.set(state.waitShare);
    if (state.pushbacksTotal > seen) total.inc(state.pushbacksTotal - seen);
    seen = state.pushbacksTotal;
  };
}

export function createFleetMetrics(options: FleetMetricsOptions = {}): FleetMetrics {
  const registry = new Registry();
  if (options.role) registry.setDefaultLabels({ role: options.role });
  const registers = [registry];
  const jobs = new Counter({ name: 'vcfleet_jobs_total', help: 'Jobs ended by this process, by queue and outcome.', labelNames: ['queue', 'outcome'], registers });
  const durations = new Histogram({
    name: 'vcfleet_stage_duration_seconds', help: 'Duration of one job of a stage, in seconds.', labelNames: ['queue', 'outcome'], buckets: DURATION_BUCKETS, registers,
  });
  const active = new Gauge({ name: 'vcfleet_active_sandboxes', help: 'Rollouts (sandboxes) running in this process.', registers });
  const rollouts = new Counter({ name: 'vcfleet_rollouts_total', help: 'Agent runs by stop reason, or infra_error.', labelNames: ['result'], registers });
  const limitHits = new Counter({ name: 'vcfleet_sandbox_limit_hits_total', help: 'Times sandboxes hit a resource limit (memory: OOM kills, pids: refused forks, disk: found full).', labelNames: ['limit'], registers });
  const refusals = new Counter({ name: 'vcfleet_gateway_refusals_total', help: 'Requests of sandboxes that the policy gateway refused, by reason.', labelNames: ['reason'], registers });
  const judgeCalls = new Counter({
    name: 'vcfleet_judge_calls_total', help: 'Judge gradings by outcome (scored, refused: the rollout\'s content made the judge refuse it, failed, error), verdict and cache hit.', labelNames: ['outcome', 'verdict', 'cached'], registers,
  });
  const rows = new Counter({ name: 'vcfleet_rows_committed_total', help: 'Rows committed by the results consumer.', labelNames: ['result', 'kind'], registers });
  const tokens = new Counter({
    name: 'vcfleet_tokens_total', help: 'Tokens of committed rows, by model role (policy, judge) and kind (input, output); a replaced row adds its judge tokens only (a rejudge).',
    labelNames: ['model_role', 'kind'], registers,
  });
  const stalls = new Counter({
    name: 'vcfleet_worker_stalls_recovered_total', help: 'Times a worker of this process sat idle with jobs waiting in its queue and its queue watchdog renewed it.', labelNames: ['queue'], registers,
  });
  const depth: QueueDepthSource = createQueueDepthGauge(registry);
  const serve = createServeGauges(registry);
  const admission = admissionMetrics(registers);
  const pace = paceMetrics(registers);

  return {
    registry,
    jobEnd: (queue) => (outcome, durationMs) => {
      jobs.inc({ queue, outcome });
      durations.observe({ queue, outcome }, Math.max(0, durationMs) / 1000);
    },
    rowCommitted(row, result) {
      rows.inc({ result, kind: row.failure_kind ?? 'scored' });
      if (result === 'new') {
        tokens.inc({ model_role: 'policy', kind: 'input' }, row.input_tokens);
        tokens.inc({ model_role: 'policy', kind: 'output' }, row.output_tokens);
      }
      if (result === 'new' || result === 'replaced') {
        tokens.inc({ model_role: 'judge', kind: 'input' }, row.judge_input_tokens);
        tokens.inc({ model_role: 'judge', kind: 'output' }, row.judge_output_tokens);
      }
    },
    wrapAgent: (agent) => ({
      host: agent.host,
      async run(request, signal) {
        active.inc();
        try {
          const result = await agent.run(request, signal);
          rollouts.inc({ result: result.outcome.stop_reason });
          for (const [limit, n] of Object.entries(result.outcome.limit_hits)) if (n) limitHits.inc({ limit }, n);
          for (const [reason, n] of Object.entries(result.outcome.refused_requests)) if (n) refusals.inc({ reason }, n);
          return result;
        } catch (err) {
          rollouts.inc({ result: 'infra_error' });
          throw err;
        } finally {
          active.dec();
        }
      },
      close: () => agent.close(),
    }),
    wrapJudge: (judge) => ({
      get modelName() {
        return judge.modelName;
      },
      async grade(input, signal) {
        try {
          const out = await judge.grade(input, signal);
          if (out.status === 'scored') judgeCalls.inc({ outcome: 'scored', verdict: out.verdict, cached: String(out.cached) });
          else judgeCalls.inc({ outcome: out.status, verdict: 'none', cached: 'false' });
          return out;
        } catch (err) {
          judgeCalls.inc({ outcome: 'error', verdict: 'none', cached: 'false' });
          throw err;
        }
      },
      close: () => judge.close(),
    }),
    stallRecovered: (queue) => stalls.inc({ queue }),
    admission,
    pace,
    watchQueues: (redis, prefix) => {
      depth.watch(redis, prefix);
      serve.watch(redis, prefix);
    },
    close: () => depth.close(),
  };
}
