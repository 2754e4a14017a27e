/**
 * Reading the judge's reply: its JSON object (from the first `{` to the last `}`, the reference's
 * rule) with `verdict` and `reason`, possibly wrapped in prose or code fences, keys and values in any
 * letter case. A reply without a valid verdict is data
 * (`ok: false` with the reason), never an exception.
 */
import { VERDICTS, type Verdict } from '../../shared/scoring/verdict.ts';

export type ParsedVerdict = { ok: true; verdict: Verdict; reason: string } | { ok: false; reason: string };

/** Longest judge reason kept, in characters; longer reasons are cut. */
export const REASON_MAX_CHARS = 500;
/** How much of a bad reply is quoted in the failure reason, in characters. */
const QUOTE_CHARS = 200;

/**
 * The JSON object of a reply, as the reference reads it: from its first `{` to its last `}` (prose
 * and code fences around it are fine; two objects, or braces in the prose, make it no object).
 */
export function replyObject(text: string): Record<string, unknown> | undefined {
  const first = text.indexOf('{');
  const last = text.lastIndexOf('}');
  if (first < 0 || last < first) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(first, last + 1));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The value of `key` in `obj`, matching the key in any letter case. */
function getKeyAnyCase(obj: Record<string, unknown>, key: string): unknown {
  const hit = Object.keys(obj).find((k) => k.trim().toLowerCase() === key);
  return hit === undefined ? undefined : obj[hit];
}

function quote(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > QUOTE_CHARS ? `${flat.slice(0, QUOTE_CHARS)}...` : flat;
}

/** Parse a judge reply: the `verdict` (any letter case, trimmed) and `reason` of its JSON object. */
export function parseVerdict(text: string): ParsedVerdict {
  const chosen = replyObject(text);
  if (!chosen || getKeyAnyCase(chosen, 'verdict') === undefined) {
    return { ok: false, reason: `judge reply has no JSON object with a "verdict" key: "${quote(text)}"` };
  }
  const raw = getKeyAnyCase(chosen, 'verdict');
  const value = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  if (!(VERDICTS as readonly string[]).includes(value)) {
    return { ok: false, reason: `judge reply has an unknown verdict ${JSON.stringify(raw)} (expected one of ${VERDICTS.join(', ')})` };
  }
  const rawReason = getKeyAnyCase(chosen, 'reason');
  const reason = typeof rawReason === 'string' ? rawReason.trim().slice(0, REASON_MAX_CHARS) : '';
  return { ok: true, verdict: value as Verdict, reason };
}
