/**
 * The refusals of a rollout id asked again as someone else (409): with another weight version (both
 * named), or with another row. A rollout id is one rollout of one row and one step's weights.
 */
import type { RequestIdentity } from '../shared/stores/request-ids.ts';
import { RequestRefused, type ParsedRun } from './gym-request.ts';

/**
 * A rollout id is one rollout of one step's weights: asked again with other weights (a trainer's next
 * step reusing `{task}-{rollout}` ids) it is refused, never answered with the older weights' response.
 */
export function checkVersion(ngRolloutId: string, accepted: string | null, parsed: ParsedRun): void {
  const asked = parsed.body.policy?.weight_version ?? null;
  if (accepted === asked) return;
  const name = (v: string | null) => (v === null ? 'no weight_version' : `weight_version ${JSON.stringify(v)}`);
  throw new RequestRefused(
    409,
    `_ng_rollout_id ${JSON.stringify(ngRolloutId)} was accepted with ${name(accepted)}; this request has ${name(asked)}: ` +
      'the same id is the same rollout, whose response is of the weights it was accepted with. Put the training step in _ng_rollout_id ' +
      `(e.g. "${asked ?? 'step-N'}-<task>-<rollout>") so each step's rollouts are new`,
  );
}

/** A rollout id claimed for another identity: another weight version (named as checkVersion does), or another row. */
export function refuseOther(ngRolloutId: string, held: RequestIdentity, parsed: ParsedRun): never {
  checkVersion(ngRolloutId, held.weightVersion, parsed);
  throw new RequestRefused(409, `_ng_rollout_id ${JSON.stringify(ngRolloutId)} was accepted before with another row: the same id is the same rollout; give a new _ng_rollout_id`);
}

