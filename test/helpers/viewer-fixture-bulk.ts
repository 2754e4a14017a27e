/**
 * A BabyVision-sized run for the viewer (388 tasks x 8 repeats = 3,104 rollouts by default), with
 * BabyVision's four types and 22 subtypes, per-type accuracies that differ, every outcome, and a
 * seeded generator so that the same options give the same file.
 */
import type { FixtureOutcome, FixtureRollout, FixtureScript } from './viewer-fixture.ts';

export const BABYVISION_TYPES: Record<string, string[]> = {
  'Fine-grained Discrimination': ['Find the Different', 'Find the Same', 'Find the Shadow', 'Count Same Patterns', 'Pattern Completion', 'Reconstruction'],
  'Visual Tracking': ['Maze', 'Connect the Lines', 'Metro Map', 'Recognize Numbers and Letters'],
  'Spatial Perception': ['3D Views', 'Cube Unfolding', 'Paper Folding', 'Count 3D Blocks', '3D Pattern Completion'],
  'Visual Pattern Recognition': ['Logic Patterns', 'Rotation Patterns', 'Mirroring Patterns', 'Overlay Patterns', 'Count Clusters', 'Lines Observation', 'Shape Patterns'],
};

/** How often each type is answered correctly, so the chart has something to show. */
const TYPE_ACCURACY: Record<string, number> = {
  'Fine-grained Discrimination': 0.42, 'Visual Tracking': 0.18, 'Spatial Perception': 0.31, 'Visual Pattern Recognition': 0.55,
};

import { seededRandom } from '../../src/shared/output/paired-stats.ts';

export { seededRandom };

function pickOutcome(rand: () => number, accuracy: number): FixtureOutcome {
  const u = rand();
  const rare: Array<[FixtureOutcome, number]> = [['no_answer', 0.05], ['timeout', 0.03], ['output_cap', 0.015], ['context_limit', 0.01], ['agent_error', 0.01], ['judge_failed', 0.015], ['infra_failed', 0.01]];
  let edge = 0;
  for (const [outcome, p] of rare) {
    edge += p;
    if (u < edge) return outcome;
  }
  return rand() < accuracy ? 'correct' : 'wrong';
}

export function babyVisionSizedRollouts(opts: { tasks?: number; repeats?: number; seed?: number } = {}): FixtureRollout[] {
  const tasks = opts.tasks ?? 388;
  const repeats = opts.repeats ?? 8;
  const rand = seededRandom(opts.seed ?? 7);
  const subtypes = Object.entries(BABYVISION_TYPES).flatMap(([type, subs]) => subs.map((subtype) => ({ type, subtype })));
  const out: FixtureRollout[] = [];
  for (let t = 0; t < tasks; t++) {
    const { type, subtype } = subtypes[t % subtypes.length];
    const expected = 'ABCD'[Math.floor(rand() * 4)];
    const difficulty = rand() * 0.5 - 0.25;
    for (let repeat = 0; repeat < repeats; repeat++) {
      const outcome = pickOutcome(rand, Math.min(0.95, Math.max(0.02, TYPE_ACCURACY[type] + difficulty)));
      const scripts: FixtureScript[] = ['plain', 'crop', 'plain', 'long_output'];
      out.push({
        task_id: String(1000 + t), repeat, type, subtype, expected, outcome,
        script: scripts[Math.floor(rand() * scripts.length)],
        extra_turns: Math.floor(rand() * rand() * 10),
        wall_s: Math.round((5 + 200 * rand() ** 3) * 1000) / 1000,
      });
    }
  }
  return out;
}
