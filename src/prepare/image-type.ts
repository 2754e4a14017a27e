/**
 * Image type detection from magic bytes. The `path` stored beside an image in the parquet is a
 * hint at best, so the bytes decide.
 */

export type ImageMime = 'image/png' | 'image/jpeg';

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const JPEG_MAGIC = [0xff, 0xd8, 0xff];

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  return bytes.length >= magic.length && magic.every((b, i) => bytes[i] === b);
}

/** The MIME type of PNG or JPEG bytes; null for anything else (GIF, WebP, text, empty). */
export function detectImageMime(bytes: Uint8Array): ImageMime | null {
  if (startsWith(bytes, PNG_MAGIC)) return 'image/png';
  if (startsWith(bytes, JPEG_MAGIC)) return 'image/jpeg';
  return null;
}

/** A short printable description of the first bytes, for error messages about unknown images. */
export function describeMagic(bytes: Uint8Array): string {
  if (bytes.length === 0) return 'empty';
  const head = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join(' ');
  return `starts with ${head}`;
}
