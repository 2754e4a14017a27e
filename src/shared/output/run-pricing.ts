/**
 * The token prices a run was produced with (`pricing.*`, run settings), for its `cost_usd`: from its
 * run record, or from the metrics file the results consumer wrote (`vcfleet metrics` recomputes from
 * the rows alone, and keeps the prices the file recorded).
 */
import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { runSettings, type RunRecord } from '../stores/run-record.ts';
import type { Pricing } from './run-cost.ts';

const price = z.object({ input_usd_per_mtok: z.number().min(0).nullable(), output_usd_per_mtok: z.number().min(0).nullable() });
const PricingSchema = z.object({ policy: price, judge: price });

/** The run's prices; undefined when its settings cannot be read here (a record of another version). */
export function pricingOf(run: RunRecord): Pricing | undefined {
  try {
    return runSettings(run).pricing;
  } catch {
    return undefined;
  }
}

/** The prices recorded in the metrics file of run `runId` (its `pricing`), or undefined. */
export function recordedPricing(metricsPath: string, runId: string): Pricing | undefined {
  if (!existsSync(metricsPath)) return undefined;
  try {
    const value = JSON.parse(readFileSync(metricsPath, 'utf8')) as { run_id?: unknown; pricing?: unknown };
    if (value.run_id !== runId) return undefined;
    const parsed = PricingSchema.safeParse(value.pricing);
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
