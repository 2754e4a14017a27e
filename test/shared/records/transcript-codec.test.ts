/**
 * A transcript record's trip through Redis is bounded both ways: encoding cuts a record until it fits
 * gzipped and uncompressed (and never throws), decoding inflates no more than the bound.
 */
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../../src/shared/errors.ts';
import { decodeTranscript, encodeTranscript, MAX_TRANSCRIPT_JSON_BYTES } from '../../../src/shared/records/transcript-codec.ts';
import { TRANSCRIPT_VERSION, TranscriptRecordSchema, type TranscriptRecord } from '../../../src/shared/records/transcript.ts';

/** A record of `turns` turns, each text, argument and output `textChars` long (random text does not compress). */
function record(turns: number, textChars: number, random = false): TranscriptRecord {
  const textOf = () => (random ? randomBytes(textChars).toString('base64').slice(0, textChars) : 'a'.repeat(textChars));
  return TranscriptRecordSchema.parse({
    transcript_version: TRANSCRIPT_VERSION, run_id: 'r', rollout_id: 'r-t-0', task_id: 't', repeat: 0, attempt: 1, benchmark: 'b', policy_model: 'p',
    task: { prompt: 'p', question: 'q', gold: 'A', ans_type: 'choice', type: 't', subtype: 's', image_sha256: 'x' }, started_at: '', wall_s: 1,
    turns: Array.from({ length: turns }, (_, index) => ({
      index, started_at: '', latency_ms: 1, status: 200, error: null, finish_reason: 'tool_calls', input_tokens: 1, output_tokens: 1, text: textOf(),
      tool_calls: [{ id: `c${index}`, name: 'bash', arguments: textOf(), output: textOf() }],
    })),
    outcome: { stop_reason: 'answered', extracted_answer: 'A', error: null },
  });
}

describe('transcript codec', () => {
  it('a record that compresses well but is huge uncompressed is cut to the uncompressed bound, and says so', () => {
    const big = record(1000, 40_000); // ~120 MB of JSON that gzips to far under 8 MiB
    const gz = encodeTranscript(big);
    const back = decodeTranscript(gz);
    expect(JSON.stringify(back).length).toBeLessThanOrEqual(MAX_TRANSCRIPT_JSON_BYTES);
    expect(back.truncated.length).toBeGreaterThan(0);
    expect(back.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'A' });
  });

  it('a record that no cut makes fit keeps its task and outcome, and says its turns are gone', () => {
    const gz = encodeTranscript(record(200, 5_000, true), 2048);
    const back = decodeTranscript(gz);
    expect(back.turns).toEqual([]);
    expect(back.truncated.at(-1)).toMatch(/all 55 turns dropped: the record did not fit its bounds even cut/);
    expect(back.outcome.extracted_answer).toBe('A');
  });

  it('decoding inflates at most the bound: a gzip bomb is a DataError, not a host out of memory', () => {
    const bomb = gzipSync(Buffer.alloc(MAX_TRANSCRIPT_JSON_BYTES + 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    expect(() => decodeTranscript(bomb)).toThrow(DataError);
    expect(() => decodeTranscript(bomb)).toThrow(/within 67108864 bytes/);
  });
});
