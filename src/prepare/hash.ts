/** SHA-256 of files (streamed, never read whole) and of byte arrays, as lowercase hex. */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

export function sha256Bytes(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Stream a file through SHA-256; memory use stays at one read chunk whatever the file size. */
export async function sha256File(filePath: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(filePath)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
