/**
 * The config sections of the evaluator's report: what tokens cost (`pricing`, run settings, so the
 * results host prices a run as it was produced) and where the paper's published rows are read from
 * (`report`, a host setting).
 */
import { z } from 'zod';
import { runSetting } from './fields.ts';

/** A price in US dollars per million tokens; null: not priced. */
const usdPerMtok = runSetting(z.number().min(0, 'a price is 0 or more US dollars per million tokens').nullable().default(null));

const PriceSchema = z
  .object({
    /** US dollars per million input (prompt) tokens; null: not priced. */
    input_usd_per_mtok: usdPerMtok,
    /** US dollars per million output (completion) tokens; null: not priced. */
    output_usd_per_mtok: usdPerMtok,
  })
  .strict();

/**
 * Token prices. When a side has a price set, the metrics carry `cost_usd: {policy, judge, total}`:
 * its tokens times its prices (a price left null on a priced side counts as 0).
 */
export const PricingSchema = z
  .object({
    policy: PriceSchema.prefault({}),
    judge: PriceSchema.prefault({}),
  })
  .strict();

export const ReportSchema = z
  .object({
    /**
     * A YAML file of published results to print beside a run's paper table (`rows: [{name, overall,
     * by_type}]`, percentages); null: the copy shipped in `configs/published_results.yaml`.
     */
    published_results: z.string().nullable().default(null),
  })
  .strict();
