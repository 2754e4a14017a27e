/**
 * Whether a token capture's mask stands (token-capture.ts holds the reasons). Reasons the model can
 * cause (a prompt that re-renders differently, a generation at the output cap, a rollout it ended
 * without an answer) are retired: a record written with one of them no longer masks, so a policy
 * cannot learn that giving up costs nothing; a broken chain is `contiguous: false`. Imports nothing
 * (the viewer's page uses it too).
 */

/** Reasons of records written before they stopped masking: read, never masking. */
export const RETIRED_MASK_REASONS: ReadonlySet<string> = new Set(['chain_broken', 'output_cap', 'not_finished']);

/** Whether a token capture's mask stands: set, and for a reason the model cannot cause. */
export function captureMasks(c: { mask_sample: boolean; mask_reason: string | null }): boolean {
  return c.mask_sample && (c.mask_reason === null || !RETIRED_MASK_REASONS.has(c.mask_reason));
}
