/**
 * What a run spent: its policy and judge tokens, and, when prices are set (`pricing.*`), their cost
 * in US dollars. Pure.
 */

/** Token totals of a run: the policy's (from the rows' `input_tokens`, `output_tokens`) and the judge's. */
export interface TokenTotals {
  policy: { input: number; output: number };
  judge: { input: number; output: number };
}

/** US dollars per million tokens of one model; null: not priced. */
export interface Price {
  input_usd_per_mtok: number | null;
  output_usd_per_mtok: number | null;
}

/** The prices of a run (`pricing.policy.*`, `pricing.judge.*`). */
export interface Pricing {
  policy: Price;
  judge: Price;
}

/** `cost_usd`: a side is null when neither of its prices is set; `total` adds the priced sides. */
export interface CostUsd {
  policy: number | null;
  judge: number | null;
  total: number;
}

const priced = (p: Price | undefined): p is Price => !!p && (p.input_usd_per_mtok !== null || p.output_usd_per_mtok !== null);

/** Dollars rounded to a millionth of a cent, so a sum printed is the sum computed. */
const usd = (x: number): number => Math.round(x * 1e8) / 1e8;

function sideCost(tokens: { input: number; output: number }, price: Price): number {
  return usd((tokens.input * (price.input_usd_per_mtok ?? 0) + tokens.output * (price.output_usd_per_mtok ?? 0)) / 1e6);
}

/** The cost of `tokens` at `pricing`, or null when no price is set at all. */
export function costOf(tokens: TokenTotals, pricing: Pricing | undefined): CostUsd | null {
  if (!pricing || (!priced(pricing.policy) && !priced(pricing.judge))) return null;
  const policy = priced(pricing.policy) ? sideCost(tokens.policy, pricing.policy) : null;
  const judge = priced(pricing.judge) ? sideCost(tokens.judge, pricing.judge) : null;
  return { policy, judge, total: usd((policy ?? 0) + (judge ?? 0)) };
}

/** A cost as a person reads it: `$1.23`, `$0.0042` (four significant places under a cent), `-` when unpriced. */
export function usdText(x: number | null | undefined): string {
  if (x === null || x === undefined) return '-';
  return x >= 0.01 || x === 0 ? `$${x.toFixed(2)}` : `$${x.toPrecision(2)}`;
}
