/** Every Redis key the fleet writes outside BullMQ's own, in one place. */

export interface FleetKeys {
  blob(sha256: string): string;
  run(runId: string): string;
  runs(): string;
  tasks(runId: string): string;
  rows(runId: string): string;
  outcomes(runId: string): string;
  enqueued(runId: string): string;
  /** A rollout's transcript on its way to the results host (record, images, the judge's part). */
  transcript(runId: string, rolloutId: string): string;
  /** Set once a rollout was handed back for waiting past `policy.max_wait_s` (the next time spends an attempt). */
  policyWaitHandBack(runId: string, rolloutId: string): string;
  /** The fleet's shared pace of calls to one policy endpoint (its token buckets), by endpoint id. */
  policyRate(endpointId: string): string;
  /** What each sandbox-worker says of its pace against one policy endpoint (for `vcfleet status`), by endpoint id. */
  policyPace(endpointId: string): string;
  /** When the fleet last reconciled the run after a lost Redis, and what it restored (JSON). */
  reconciled(runId: string): string;
  /** Stalled workers the queue watchdog recovered, per queue (a hash; stall-record.ts). */
  watchdog(): string;
  /** The results writer's lock of the fleet's queues (null) or of one run's own. */
  writerLock(scope?: string | null): string;
  /** A `vcfleet serve` rollout's task, as its request gave it (gzipped; request-task.ts). */
  requestTask(runId: string, rolloutId: string): string;
  /** Who each `vcfleet serve` rollout id of a run was accepted for: rollout id -> its weight version and row fingerprint (a hash; request-ids.ts). */
  requestIds(runId: string): string;
  /** A `vcfleet serve` rollout's finished response, until it is fetched or expires (gzipped; request-task.ts). */
  requestResponse(runId: string, rolloutId: string): string;
  /** Set when a `vcfleet serve` rollout was cancelled (`DELETE /rollouts/{id}`). */
  requestCancel(runId: string, rolloutId: string): string;
  /** The pub/sub channel on which the results consumer names each `vcfleet serve` rollout whose response is ready. */
  requestResponses(runId: string): string;
  /** The `vcfleet serve` rollouts of a run accepted and not finished: rollout id -> its image bytes, weight version, client id (JSON). */
  servePending(runId: string): string;
  /** The image bytes of those pending rollouts, in total. */
  servePendingBytes(runId: string): string;
  /** Requests of a run refused for its bounds, by reason (`max_pending`, `image_budget`). */
  serveRefused(runId: string): string;
  /** The runs that ever had a pending `vcfleet serve` request (Prometheus reads their counts). */
  serveRuns(): string;
  /** The live run that writes an output file, by the file's absolute path (output-claim.ts). */
  outputClaim(file: string): string;
}

export function fleetKeys(prefix: string): FleetKeys {
  return {
    blob: (sha) => `${prefix}:blob:${sha}`,
    run: (id) => `${prefix}:run:${id}`,
    runs: () => `${prefix}:runs`,
    tasks: (id) => `${prefix}:run:${id}:tasks`,
    rows: (id) => `${prefix}:run:${id}:rows`,
    outcomes: (id) => `${prefix}:run:${id}:outcomes`,
    enqueued: (id) => `${prefix}:run:${id}:enqueued`,
    transcript: (id, rollout) => `${prefix}:run:${id}:transcript:${rollout}`,
    policyWaitHandBack: (id, rollout) => `${prefix}:run:${id}:policy-wait:${rollout}`,
    policyRate: (endpoint) => `${prefix}:policy-rate:${endpoint}`,
    policyPace: (endpoint) => `${prefix}:policy-pace:${endpoint}`,
    reconciled: (id) => `${prefix}:run:${id}:reconciled`,
    requestTask: (id, rollout) => `${prefix}:run:${id}:request:${rollout}`,
    requestIds: (id) => `${prefix}:run:${id}:request-ids`,
    requestResponse: (id, rollout) => `${prefix}:run:${id}:response:${rollout}`,
    requestCancel: (id, rollout) => `${prefix}:run:${id}:cancel:${rollout}`,
    requestResponses: (id) => `${prefix}:run:${id}:responses`,
    servePending: (id) => `${prefix}:run:${id}:serve-pending`,
    servePendingBytes: (id) => `${prefix}:run:${id}:serve-pending-bytes`,
    serveRefused: (id) => `${prefix}:run:${id}:serve-refused`,
    serveRuns: () => `${prefix}:serve-runs`,
    outputClaim: (file) => `${prefix}:output-claim:${file}`,
    watchdog: () => `${prefix}:watchdog`,
    writerLock: (scope = null) => (scope === null ? `${prefix}:results-writer-lock` : `${prefix}:results-writer-lock:${scope}`),
  };
}
