/**
 * The response of a `vcfleet serve` rollout: once its row is committed, the results consumer builds
 * NeMo Gym's verify-response row (shared/output/gym-row.ts) from the row, the transcript and
 * trajectory it just wrote (with the images a tool result brought into a later prompt, read back from
 * the transcripts' image folder), and the request's own fields (its task record), and leaves it in Redis
 * for serve (gzipped, expiring; request-store.ts). Serve may run on another host: it never reads
 * this host's files.
 */
import type { Logger } from '../../shared/logger.ts';
import { ROUTING_KEYS, type GymRequestFields } from '../../shared/output/gym-request-fields.ts';
import { gymRow } from '../../shared/output/gym-row.ts';
import { responseImageUrls } from '../../shared/output/response-images.ts';
import type { RequestStore } from '../../shared/stores/request-store.ts';
import { isCancelledError, echoedParams, type RequestTask } from '../../shared/records/request-task.ts';
import type { Row } from '../../shared/records/rows.ts';
import type { TranscriptRecord } from '../../shared/records/transcript.ts';
import type { Trajectory } from '../../shared/records/trajectory.ts';

const KNOWN = new Set<string>([...ROUTING_KEYS, 'expected_answer']);

/** The fields of the request the response repeats: `responses_create_params` as given, the gold, the routing fields and the row's extras. */
export function requestFields(request: RequestTask): GymRequestFields {
  const known: Record<string, unknown> = {};
  const extras: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request.echo.routing)) (KNOWN.has(key) ? known : extras)[key] = value;
  return { ...(known as Omit<GymRequestFields, 'responses_create_params'>), extras, responses_create_params: echoedParams(request) as GymRequestFields['responses_create_params'] };
}

/** The verify-response row of a request's rollout; a cancelled one's failure is terminal (asking again gives the same). */
export function requestResponse(
  row: Row, request: RequestTask, transcript: TranscriptRecord | null, trajectory: Trajectory | null, imageUrls?: ReadonlyMap<string, string>,
): Record<string, unknown> {
  return gymRow({ row, transcript, trajectory, request: requestFields(request), failureTerminal: isCancelledError(row.error), imageUrls }) as unknown as Record<string, unknown>;
}

export async function deliverResponse(
  requests: Pick<RequestStore, 'findTask' | 'putResponse'>,
  committed: { row: Row; result: 'new' | 'duplicate' | 'replaced'; transcript: TranscriptRecord | null; trajectory: Trajectory | null; jsonlPath: string },
  logger: Logger,
): Promise<void> {
  const { row } = committed;
  const request = await requests.findTask(row.run_id, row.rollout_id);
  if (!request) {
    logger.warn({ rollout_id: row.rollout_id }, 'no request is kept for this row of a serve run (expired, or made otherwise): no response is left for serve');
    return;
  }
  // The images a tool result brought into a later prompt, as the results consumer just wrote them beside the JSONL.
  const imageUrls = committed.transcript ? await responseImageUrls(committed.jsonlPath, committed.transcript) : undefined;
  const response = requestResponse(row, request, committed.transcript, committed.trajectory, imageUrls);
  await requests.putResponse(
    row.run_id,
    { v: 1, rollout_id: row.rollout_id, ng_rollout_id: request.ng_rollout_id, response, finished_at: row.finished_at },
    request.response_ttl_s,
    // A row delivered again keeps the response there is; a new row (a rejudge of a masked one) replaces it.
    committed.result === 'duplicate',
  );
}
