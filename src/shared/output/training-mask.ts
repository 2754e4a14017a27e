/**
 * Whether a trainer may use a rollout, and why not: the one rule behind the gym row's `mask_sample`
 * and `mask_reason` (gym-row.ts), the flat token record's (token-record.ts) and the masked rows
 * `vcfleet export` counts by reason. The first that applies:
 * 1. a masked row (`failure_kind` set: a judge or infrastructure failure, never a score) masks, by its kind;
 * 2. a row without a reward masks (`no_reward`): there is nothing to train towards;
 * 3. the token capture's own mask: the trajectory's when it is at hand, else the row's `token_capture`
 *    summary (what the trajectory said when it was written); `not_finished` when it gives no reason.
 *    Only reasons the model cannot cause mask (token-capture.ts): an old record masked `chain_broken`,
 *    `output_cap` or `not_finished` is trainable with its reward.
 */
import type { FailureKind, Row } from '../records/rows.ts';
import { captureMasks, type MaskReason, type Trajectory } from '../records/trajectory.ts';

export interface TrainingMask {
  /** A trainer must not use the rollout (its reward or its tokens). */
  mask_sample: boolean;
  /** Why: the first rule above that applies; null when it may be used. */
  reason: FailureKind | MaskReason | 'no_reward' | null;
  /** The token capture's own reason, whatever else masks the row (the gym row's `mask_reason`); null without one. */
  capture_reason: MaskReason | null;
}

/** The mask of a row and its trajectory (null or absent when not at hand: the row's token-capture summary stands in). */
export function maskOf(
  row: Pick<Row, 'failure_kind' | 'reward' | 'token_capture'>, trajectory?: Pick<Trajectory, 'mask_sample' | 'mask_reason'> | null,
): TrainingMask {
  const capture = trajectory ?? row.token_capture;
  const masks = capture ? captureMasks(capture) : false;
  const captureReason = masks ? (capture?.mask_reason ?? null) : null;
  const reason = row.failure_kind ?? (row.reward === null ? 'no_reward' : masks ? (captureReason ?? 'not_finished') : null);
  return { mask_sample: reason !== null, reason, capture_reason: captureReason };
}
