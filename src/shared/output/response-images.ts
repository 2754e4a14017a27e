/**
 * The images a gym row's `response.output` inlines (gym-response.ts): those a rollout's tool results
 * brought into a later prompt (a `read` of an image) and those a later call showed, read from the
 * transcripts' image folder beside the run's JSONL (`<stem>_transcripts/images/<sha256>.<ext>`), as
 * data URLs by SHA-256. An image not on disk (kept by hash only: over the rollout's image budget,
 * `transcripts.max_image_mib`) is left out; the response names it instead.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { imageFileName, transcriptDirFor, type TranscriptRecord } from '../records/transcript.ts';

/** The SHA-256 of every image the response inlines: each tool result's, and those shown after the first call. */
export function responseImageShas(transcript: Pick<TranscriptRecord, 'turns'>): string[] {
  const shas = new Set<string>();
  transcript.turns.forEach((t, k) => {
    if (k > 0) for (const sha of t.shown_images) shas.add(sha);
    for (const c of t.tool_calls) for (const sha of c.images) shas.add(sha);
  });
  return [...shas];
}

/** The data URL of each image the response inlines that is on disk beside `jsonlPath`, by SHA-256. */
export async function responseImageUrls(jsonlPath: string, transcript: Pick<TranscriptRecord, 'turns' | 'image_mimes'>): Promise<Map<string, string>> {
  const folder = path.join(transcriptDirFor(jsonlPath), 'images');
  const urls = new Map<string, string>();
  for (const sha of responseImageShas(transcript)) {
    const mime = transcript.image_mimes[sha];
    if (!mime || !/^[0-9a-f]{64}$/.test(sha)) continue;
    const bytes = await readFile(path.join(folder, imageFileName(sha, mime))).catch(() => null);
    if (bytes) urls.set(sha, `data:${mime};base64,${bytes.toString('base64')}`);
  }
  return urls;
}
