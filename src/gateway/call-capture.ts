/**
 * `capture: true`: each policy call's request and response appended as one JSON line to
 * `<transcriptDir>/<rolloutId>.calls.jsonl` (unknown fields such as token ids and logprobs kept).
 * Image data URLs become placeholders; each distinct image is stored once in `imageDir`.
 */
import { access, appendFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../shared/logger.ts';
import { redactImages, type RedactedImage } from './redact-images.ts';

export interface CallCapture {
  write(record: Record<string, unknown>): void;
  /** Resolves when every line so far is on disk. */
  flush(): Promise<void>;
}

export async function createCallCapture(opts: { path: string; imageDir?: string; logger?: Logger }): Promise<CallCapture> {
  await mkdir(path.dirname(opts.path), { recursive: true });
  const stored = new Set<string>();
  let chain: Promise<void> = Promise.resolve();

  async function storeImage(img: RedactedImage): Promise<void> {
    if (!opts.imageDir || stored.has(img.sha256)) return;
    stored.add(img.sha256);
    await mkdir(opts.imageDir, { recursive: true });
    const ext = (img.mime.split('/')[1] ?? 'bin').replace('jpeg', 'jpg');
    const file = path.join(opts.imageDir, `${img.sha256}.${ext}`);
    if (!(await access(file).then(() => true, () => false))) await writeFile(file, img.bytes);
  }

  return {
    write(record) {
      const images: RedactedImage[] = [];
      const line = JSON.stringify(redactImages(record, (img) => images.push(img))) + '\n';
      chain = chain
        .then(async () => {
          for (const img of images) await storeImage(img);
          await appendFile(opts.path, line);
        })
        .catch((err: unknown) => opts.logger?.warn({ err }, 'could not write the policy call capture'));
    },
    flush: () => chain,
  };
}
