/**
 * The demo's synthetic puzzles: small images drawn in code (both answer types), written as a
 * prepared benchmark, with the answers the demo's scripted policy gives.
 */
import type { BenchmarkName } from '../shared/config/load.ts';
import { buildPreparedTask } from '../prepare/build-task.ts';
import { createPreparedWriter } from '../prepare/write-prepared.ts';
import { sha256Bytes } from '../prepare/hash.ts';
import { encodePng, type Rgb } from './png.ts';

export interface DemoPuzzle {
  taskId: string;
  question: string;
  options: string[];
  ansType: 'choice' | 'blank';
  gold: string;
  type: string;
  subtype: string;
  image: Uint8Array;
  /** What the demo policy answers (the gold, except where the demo shows a wrong answer). */
  policyAnswer: string;
}

const WHITE: Rgb = [255, 255, 255];
const inBox = (x: number, y: number, x0: number, y0: number, size: number) => x >= x0 && x < x0 + size && y >= y0 && y < y0 + size;

function squares(): Uint8Array {
  const red: Array<[number, number]> = [[20, 20], [140, 40], [60, 150]];
  const blue: Array<[number, number]> = [[150, 150], [90, 80]];
  return encodePng(220, 220, (x, y) =>
    red.some(([a, b]) => inBox(x, y, a, b, 40)) ? [220, 30, 30] : blue.some(([a, b]) => inBox(x, y, a, b, 40)) ? [30, 60, 220] : WHITE,
  );
}

function circleQuadrant(): Uint8Array {
  return encodePng(200, 200, (x, y) => ((x - 150) ** 2 + (y - 50) ** 2 < 30 ** 2 ? [20, 170, 60] : x === 100 || y === 100 ? [0, 0, 0] : WHITE));
}

function stripes(): Uint8Array {
  return encodePng(200, 160, (_x, y) => ([30, 60, 90, 120].some((s) => y >= s && y < s + 4) ? [0, 0, 0] : WHITE));
}

function halves(): Uint8Array {
  return encodePng(200, 120, (x) => (x < 100 ? [200, 200, 200] : [60, 60, 60]));
}

export function demoPuzzles(): DemoPuzzle[] {
  return [
    { taskId: 'demo-red-squares', question: 'How many red squares are in the picture?', options: [], ansType: 'blank', gold: '3', type: 'Fine-grained Discrimination', subtype: 'Count Same Shapes', image: squares(), policyAnswer: '3' },
    { taskId: 'demo-green-circle', question: 'In which quadrant is the green circle?', options: ['top-left', 'top-right', 'bottom-left', 'bottom-right'], ansType: 'choice', gold: 'B', type: 'Spatial Perception', subtype: 'Quadrant', image: circleQuadrant(), policyAnswer: 'B' },
    { taskId: 'demo-black-lines', question: 'How many horizontal black lines cross the image?', options: [], ansType: 'blank', gold: '4', type: 'Visual Tracking', subtype: 'Line Counting', image: stripes(), policyAnswer: '4' },
    // The demo policy gets this one wrong on purpose, so the judge's "different" shows up too.
    { taskId: 'demo-darker-half', question: 'Which half of the image is darker?', options: ['left', 'right'], ansType: 'choice', gold: 'B', type: 'Visual Pattern Recognition', subtype: 'Brightness', image: halves(), policyAnswer: 'A' },
  ];
}

/** The demo policy's lookup table: question text -> answer. */
export function demoAnswers(puzzles: readonly DemoPuzzle[]): Record<string, string> {
  return Object.fromEntries(puzzles.map((p) => [p.question, p.policyAnswer]));
}

/** Write the puzzles as the prepared benchmark `<dataDir>/<benchmark>` (replacing an older one). */
export async function writeDemoBenchmark(dataDir: string, benchmark: BenchmarkName, puzzles: readonly DemoPuzzle[]): Promise<void> {
  const writer = await createPreparedWriter(dataDir, benchmark);
  try {
    const tasks = puzzles.map((p, rowIndex) => buildPreparedTask({ ...p, imageMime: 'image/png', rowIndex }, benchmark));
    for (const [i, task] of tasks.entries()) await writer.addImage(task, puzzles[i].image);
    await writer.addTasks(tasks);
    await writer.commit({
      version: 1,
      benchmark,
      source_sha256: sha256Bytes(Buffer.from(JSON.stringify(puzzles.map((p) => [p.taskId, p.gold])))),
      source_path: 'synthetic demo puzzles',
      num_tasks: tasks.length,
      num_images: writer.imageCount(),
      prepared_at: new Date().toISOString(),
    });
  } catch (err) {
    await writer.abort();
    throw err;
  }
}
