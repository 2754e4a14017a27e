/**
 * Reading the judge's reply: a JSON object with `verdict` and `reason`, possibly wrapped in prose or
 * code fences, keys and values in any letter case. A reply without a valid verdict is data
 * (`ok: false` with the reason), never an exception.
 */
import { VERDICTS, type Verdict } from '../../shared/judge.ts';

export type ParsedVerdict = { ok: true; verdict: Verdict; reason: string } | { ok: false; reason: string };

/** Longest judge reason kept, in characters; longer reasons are cut. */
export const REASON_MAX_CHARS = 500;
/** How much of a bad reply is quoted in the failure reason, in characters. */
const QUOTE_CHARS = 200;

/** The end index (exclusive) of the balanced `{...}` starting at `start`, honouring JSON strings; -1 if unbalanced. */
export function matchBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{') depth++;
    else if (ch === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

/** Every top-level JSON object found in `text` (prose, fences and broken candidates are skipped). */
export function findJsonObjects(text: string): Record<string, unknown>[] {
  const found: Record<string, unknown>[] = [];
  let i = text.indexOf('{');
  while (i !== -1) {
    const end = matchBrace(text, i);
    const parsed = end === -1 ? undefined : tryParseObject(text.slice(i, end));
    if (parsed) {
      found.push(parsed);
      i = text.indexOf('{', end);
    } else i = text.indexOf('{', i + 1);
  }
  return found;
}

function tryParseObject(candidate: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(candidate);
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

/** Parse a judge reply. The last JSON object that has a `verdict` key decides. */
export function parseVerdict(text: string): ParsedVerdict {
  const withVerdict = findJsonObjects(text).filter((o) => getKeyAnyCase(o, 'verdict') !== undefined);
  const chosen = withVerdict[withVerdict.length - 1];
  if (!chosen) {
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
