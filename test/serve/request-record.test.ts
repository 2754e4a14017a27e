/**
 * The pure parts of `vcfleet serve`: rollout ids derived from `_ng_rollout_id` (the same id is the
 * same rollout, two ids never meet, BullMQ's forbidden `:` never appears), the task record kept of a
 * request (its images once, the echoed params given back exactly as sent), its gzipped round trip,
 * and image types told by their bytes.
 */
import { describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { parseRunBody } from '../../src/serve/gym-request.ts';
import { requestRecord, serveRolloutId } from '../../src/serve/request-record.ts';
import { decodeRequestTask, echoedParams, encodeRecord, requestImageMime } from '../../src/shared/records/request-task.ts';
import { fixtureJpeg, fixturePng } from '../helpers/fixture-images.ts';
import { gymRow, jpegUrl, pngUrl, WEBP_1X1, webpUrl } from '../helpers/serve.ts';

const bounds = { maxImageBytes: 1024 * 1024, maxImages: 4, allowedBaseUrls: ['http://policy:8000/v1', 'http://other:9000/v1'] };

describe('serve request records', () => {
  it('derives rollout ids: safe ids kept, others hashed apart, never a colon', () => {
    expect(serveRolloutId('run1', 'step3-task7-r2')).toBe('run1-ng-step3-task7-r2');
    const [a, b] = [serveRolloutId('run1', 'a:b'), serveRolloutId('run1', 'a_b')];
    expect(a).not.toBe(b);
    expect(a).toMatch(/^run1-ng-a_b-[0-9a-f]{16}$/);
    expect(serveRolloutId('run1', 'a:b')).toBe(a);
    const long = serveRolloutId('run1', 'x'.repeat(300));
    expect(long.length).toBeLessThan(120);
    expect(long).not.toBe(serveRolloutId('run1', 'x'.repeat(301)));
    expect(serveRolloutId('r', 'ü/ 😀:')).not.toContain(':');
  });

  it('tells PNG, JPEG and WebP by their bytes, nothing else', () => {
    expect(requestImageMime(fixturePng(1))).toBe('image/png');
    expect(requestImageMime(fixtureJpeg('a'))).toBe('image/jpeg');
    expect(requestImageMime(WEBP_1X1)).toBe('image/webp');
    expect(requestImageMime(Buffer.from('GIF89a....'))).toBeNull();
    expect(requestImageMime(Buffer.from('<svg/>'))).toBeNull();
    expect(requestImageMime(Buffer.alloc(0))).toBeNull();
  });

  it('keeps each image once and gives responses_create_params back exactly as sent', () => {
    const body = gymRow('Which? serve-unit', 'B', {
      _ng_rollout_id: 7, _ng_task_index: 2, l2_category: 'Maze', policy: { model: 'm2', weight_version: 'w9', base_url: 'http://other:9000/v1/' },
    }, [pngUrl(3), jpegUrl('q'), webpUrl()]);
    (body.responses_create_params as Record<string, unknown>).temperature = 0.6;
    (body.responses_create_params as Record<string, unknown>).max_output_tokens = 512;
    const parsed = parseRunBody(body, bounds);
    expect(parsed.ngRolloutId).toBe('7');
    expect(parsed.ansType).toBe('choice');
    const record = requestRecord(parsed, { benchmark: 'babyvision_opencode', ngRolloutId: '7', responseTtlS: 60, fetchedTtlS: 10 });
    expect(record.images.map((i) => i.mime)).toEqual(['image/png', 'image/jpeg', 'image/webp']);
    expect(record.task).toMatchObject({ task_id: 'task-2', prompt: 'Which? serve-unit', gold: 'B', subtype: 'Maze', type: 'unspecified', image_mime: 'image/png', image_sha256: record.images[0].sha256 });
    expect(record.policy).toEqual({ model: 'm2', weight_version: 'w9', base_url: 'http://other:9000/v1', sampling: { temperature: 0.6 }, max_output_tokens: 512 });
    // Kept without the image bytes twice; given back whole.
    expect(JSON.stringify(record.echo)).not.toContain('base64');
    expect(echoedParams(record)).toEqual(body.responses_create_params);
    expect(record.echo.routing).toMatchObject({ _ng_rollout_id: 7, _ng_task_index: 2, expected_answer: 'B', l2_category: 'Maze' });
    const back = decodeRequestTask(encodeRecord(record));
    expect(back).toEqual(record);
    // The same row in another key order is the same request; another row is not.
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    expect(parseRunBody(reordered, bounds).fingerprint).toBe(parsed.fingerprint);
    expect(parseRunBody({ ...body, expected_answer: 'C' }, bounds).fingerprint).not.toBe(parsed.fingerprint);
  });

  it('refuses a record that is not what it should be, saying so', () => {
    expect(() => decodeRequestTask(Buffer.from('not gzip'))).toThrow(/request task record in Redis cannot be read/);
    expect(() => decodeRequestTask(gzipSync(JSON.stringify({ v: 1 })))).toThrow(/request task record in Redis is malformed/);
  });
});
