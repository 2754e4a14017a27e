/**
 * Replaces base64 image data URLs inside JSON values by a short placeholder
 * (`<image sha256=... bytes=... mime=...>`), so that transcripts and call logs stay small.
 */
import { createHash } from 'node:crypto';

const DATA_URL = /^data:([\w.+/-]+);base64,/;

export interface RedactedImage {
  sha256: string;
  mime: string;
  bytes: Buffer;
}

/** The placeholder for one data URL; `onImage` receives the decoded bytes (e.g. to store them once). */
export function imagePlaceholder(dataUrl: string, onImage?: (image: RedactedImage) => void): string {
  const match = DATA_URL.exec(dataUrl);
  if (!match) return dataUrl;
  const bytes = Buffer.from(dataUrl.slice(match[0].length), 'base64');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  onImage?.({ sha256, mime: match[1], bytes });
  return `<image sha256=${sha256} bytes=${bytes.length} mime=${match[1]}>`;
}

/** A deep copy of `value` with every data-URL string (longer than `minChars`) replaced. */
export function redactImages<T>(value: T, onImage?: (image: RedactedImage) => void, minChars = 64): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return v.length >= minChars && DATA_URL.test(v) ? imagePlaceholder(v, onImage) : v;
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}
