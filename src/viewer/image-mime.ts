/**
 * The content type an image is served with, decided from its bytes alone: PNG, JPEG, GIF or WebP.
 * Anything else (SVG, HTML, text, an unknown format) is never served, whatever its file is called,
 * since a browser may run script in SVG or HTML that a model wrote.
 */

export type ServedImageMime = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

function startsWith(bytes: Uint8Array, at: number, magic: readonly number[]): boolean {
  return bytes.length >= at + magic.length && magic.every((b, i) => bytes[at + i] === b);
}

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));

/** The MIME type of PNG, JPEG, GIF or WebP bytes; null for anything else. */
export function servedImageMime(bytes: Uint8Array): ServedImageMime | null {
  if (startsWith(bytes, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (startsWith(bytes, 0, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (startsWith(bytes, 0, ascii('GIF87a')) || startsWith(bytes, 0, ascii('GIF89a'))) return 'image/gif';
  if (startsWith(bytes, 0, ascii('RIFF')) && startsWith(bytes, 8, ascii('WEBP'))) return 'image/webp';
  return null;
}
