/** Rows of the reference's dataset as a trainer posts them to `vcfleet serve`, with small real images. */
import { fixtureJpeg, fixturePng } from './fixture-images.ts';

export const pngUrl = (seed: number, size = 8) => `data:image/png;base64,${Buffer.from(fixturePng(seed, size)).toString('base64')}`;
export const jpegUrl = (label: string) => `data:image/jpeg;base64,${Buffer.from(fixtureJpeg(label)).toString('base64')}`;

/** A small WebP file (RIFF/WEBP, one lossless 1x1 frame). */
export const WEBP_1X1 = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');
export const webpUrl = () => `data:image/webp;base64,${WEBP_1X1.toString('base64')}`;

/** One dataset row: `text` is the prompt, `gold` the expected answer, `extra` any field more (or one to replace). */
export function gymRow(text: string, gold: string, extra: Record<string, unknown> = {}, imageUrls: string[] = [pngUrl(1)]): Record<string, unknown> {
  return {
    responses_create_params: {
      input: [{ role: 'user', type: 'message', content: [...imageUrls.map((u) => ({ type: 'input_image', image_url: u, detail: 'auto' })), { type: 'input_text', text }] }],
    },
    expected_answer: gold,
    question: text,
    ...extra,
  };
}
