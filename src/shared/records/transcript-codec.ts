/**
 * A transcript record as it travels through Redis: gzipped JSON within two bounds, its gzipped size
 * and its size uncompressed (so a record that compresses well cannot expand without limit on the
 * results host). A record over either bound is cut step by step (long tool outputs, then long texts,
 * then the middle turns, then every text), and each cut is named in `truncated`, so the results host
 * always gets a readable record. Encoding never throws: a record that cannot even be serialised
 * keeps its task and outcome and says why its turns are gone. Decoding reads at most the same bound.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { DataError } from '../errors.ts';
import { TranscriptRecordSchema, type TranscriptRecord } from './transcript.ts';

/** Default bound of one gzipped record, in bytes. */
export const DEFAULT_MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024;
/** Bound of one record's JSON, uncompressed, in bytes (what the results host inflates at most). */
export const MAX_TRANSCRIPT_JSON_BYTES = 64 * 1024 * 1024;

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

/** The gzipped JSON of a record, or null when it is over a bound (or cannot be serialised at all). */
function tryEncode(record: TranscriptRecord, maxBytes: number, maxJsonBytes: number): Buffer | null {
  let json: string;
  try {
    json = JSON.stringify(record);
  } catch {
    return null; // too large for one string
  }
  if (Buffer.byteLength(json) > maxJsonBytes) return null;
  const gz = gzipSync(json);
  return gz.length <= maxBytes ? gz : null;
}

/** The record without its turns: what is left when no cut makes it fit. */
function withoutTurns(record: TranscriptRecord): TranscriptRecord {
  const note = `all ${record.turns.length} turns dropped: the record did not fit its bounds even cut`;
  return { ...record, turns: [], truncated: [...record.truncated.slice(0, 20), note] };
}

/** Gzipped JSON of the record, cut until it fits in `maxBytes` gzipped and `maxJsonBytes` uncompressed; never throws. */
export function encodeTranscript(record: TranscriptRecord, maxBytes = DEFAULT_MAX_TRANSCRIPT_BYTES, maxJsonBytes = MAX_TRANSCRIPT_JSON_BYTES): Buffer {
  let current = record;
  let encoded = tryEncode(current, maxBytes, maxJsonBytes);
  for (const cut of CUTS) {
    if (encoded) return encoded;
    current = cut.apply({ ...current, truncated: [...current.truncated, cut.note] });
    encoded = tryEncode(current, maxBytes, maxJsonBytes);
  }
  return encoded ?? gzipSync(JSON.stringify(withoutTurns(current)));
}

/** The record from its gzipped JSON, inflated at most to `maxJsonBytes`; throws DataError for anything else. */
export function decodeTranscript(gz: Buffer, maxJsonBytes = MAX_TRANSCRIPT_JSON_BYTES): TranscriptRecord {
  let json: unknown;
  try {
    json = JSON.parse(gunzipSync(gz, { maxOutputLength: maxJsonBytes }).toString('utf8'));
  } catch (err) {
    throw new DataError(`a transcript record is not gzipped JSON within ${maxJsonBytes} bytes: ${(err as Error).message}`);
  }
  const parsed = TranscriptRecordSchema.safeParse(json);
  if (!parsed.success) throw new DataError(`a transcript record is malformed: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
