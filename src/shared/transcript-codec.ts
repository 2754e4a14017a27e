/**
 * A transcript record as it travels through Redis: gzipped JSON within a byte bound. A record over
 * the bound is cut step by step (long tool outputs, then long texts, then the middle turns), and
 * each cut is named in `truncated`, so the results host always gets a readable record.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { DataError } from './errors.ts';
import { TranscriptRecordSchema, type TranscriptRecord } from './transcript.ts';

/** Default bound of one gzipped record, in bytes. */
export const DEFAULT_MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024;

function cutText(text: string, keep: number): string {
  return text.length <= keep ? text : `${text.slice(0, keep / 2)}\n[... ${text.length - keep} characters cut ...]\n${text.slice(-keep / 2)}`;
}

type Cut = { note: string; apply(r: TranscriptRecord): TranscriptRecord };

const CUTS: Cut[] = [
  {
    note: 'tool outputs cut to 4,000 characters',
    apply: (r) => ({ ...r, turns: r.turns.map((t) => ({ ...t, tool_calls: t.tool_calls.map((c) => ({ ...c, output: c.output === null ? null : cutText(c.output, 4000), arguments: cutText(c.arguments, 4000) })) })) }),
  },
  {
    note: 'texts cut to 20,000 characters',
    apply: (r) => ({ ...r, turns: r.turns.map((t) => ({ ...t, text: cutText(t.text, 20_000), reasoning: t.reasoning === null ? null : cutText(t.reasoning, 20_000) })) }),
  },
  {
    note: 'only the first 5 and the last 50 turns kept',
    apply: (r) => (r.turns.length <= 55 ? r : { ...r, turns: [...r.turns.slice(0, 5), ...r.turns.slice(-50)] }),
  },
  {
    note: 'turn texts and tool outputs dropped',
    apply: (r) => ({ ...r, turns: r.turns.map((t) => ({ ...t, text: cutText(t.text, 500), reasoning: null, tool_calls: t.tool_calls.map((c) => ({ ...c, output: null, arguments: cutText(c.arguments, 500) })) })) }),
  },
];

/** Gzipped JSON of the record, cut until it fits in `maxBytes`. */
export function encodeTranscript(record: TranscriptRecord, maxBytes = DEFAULT_MAX_TRANSCRIPT_BYTES): Buffer {
  let current = record;
  let encoded = gzipSync(JSON.stringify(current));
  for (const cut of CUTS) {
    if (encoded.length <= maxBytes) break;
    current = cut.apply({ ...current, truncated: [...current.truncated, cut.note] });
    encoded = gzipSync(JSON.stringify(current));
  }
  return encoded;
}

export function decodeTranscript(gz: Buffer): TranscriptRecord {
  let json: unknown;
  try {
    json = JSON.parse(gunzipSync(gz).toString('utf8'));
  } catch (err) {
    throw new DataError(`a transcript record is not gzipped JSON: ${(err as Error).message}`);
  }
  const parsed = TranscriptRecordSchema.safeParse(json);
  if (!parsed.success) throw new DataError(`a transcript record is malformed: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
