/**
 * Reading the judge's reply: the last balanced JSON object in it with a valid `verdict` (and its
 * `reason`), possibly wrapped in prose or code fences, keys and values in any letter case. Objects
 * the judge quotes before its own (the model's text holding `{"verdict": ...}`) and braces in its prose
 * (`\boxed{C}`) hide nothing: the judge's verdict is its last word. A reply without a valid verdict is
 * data (`ok: false` with the reason), never an exception.
 */
import { VERDICTS, type Verdict } from '../../shared/scoring/verdict.ts';

export type ParsedVerdict = { ok: true; verdict: Verdict; reason: string } | { ok: false; reason: string };

/** Longest judge reason kept, in characters; longer reasons are cut. */
export const REASON_MAX_CHARS = 500;
/** How much of a bad reply is quoted in the failure reason, in characters. */
const QUOTE_CHARS = 200;

/** Where the object opening at `start` closes (its balanced `}`, braces inside JSON strings not counted); -1 when it does not. */
function closingBrace(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

/**
 * The top-level JSON objects of a reply, in order: each `{` whose balanced text parses as an object
 * (objects inside it are its own, not listed again); a brace in prose that opens no object is skipped.
 */
export function replyObjects(text: string): Array<Record<string, unknown>> {
  const found: Array<Record<string, unknown>> = [];
  for (let i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) {
    const end = closingBrace(text, i);
    if (end < 0) continue;
    try {
      const value: unknown = JSON.parse(text.slice(i, end + 1));
      if (value && typeof value === 'object' && !Array.isArray(value)) {
        found.push(value as Record<string, unknown>);
        i = end;
      }
    } catch {
      // Not JSON: a brace of the prose; the next `{` may open one.
    }
  }
  return found;
}

/** The last JSON object of a reply (see replyObjects); undefined when it has none. */
export function replyObject(text: string): Record<string, unknown> | undefined {
  return replyObjects(text).at(-1);
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

const verdictOf = (obj: Record<string, unknown>): string => {
  const raw = getKeyAnyCase(obj, 'verdict');
  return typeof raw === 'string' ? raw.trim().toLowerCase() : '';
};

/** Parse a judge reply: the `verdict` (any letter case, trimmed) and `reason` of its last JSON object with a valid verdict. */
export function parseVerdict(text: string): ParsedVerdict {
  const withKey = replyObjects(text).filter((o) => getKeyAnyCase(o, 'verdict') !== undefined);
  if (withKey.length === 0) return { ok: false, reason: `judge reply has no JSON object with a "verdict" key: "${quote(text)}"` };
  const chosen = withKey.filter((o) => (VERDICTS as readonly string[]).includes(verdictOf(o))).at(-1);
  if (!chosen) {
    const raw = getKeyAnyCase(withKey.at(-1)!, 'verdict');
    return { ok: false, reason: `judge reply has an unknown verdict ${JSON.stringify(raw)} (expected one of ${VERDICTS.join(', ')})` };
  }
  const rawReason = getKeyAnyCase(chosen, 'reason');
  const reason = typeof rawReason === 'string' ? rawReason.trim().slice(0, REASON_MAX_CHARS) : '';
  return { ok: true, verdict: verdictOf(chosen) as Verdict, reason };
}
