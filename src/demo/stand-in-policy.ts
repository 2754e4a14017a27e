/**
 * `vcfleet stand-in policy`: the demo's agent (scripts.agent: Python on the image once, then a boxed
 * answer) as a policy a user points `run` and `serve` at, with the behaviours they pick:
 *
 * - `right` (default): the demo's answers on the demo puzzles (`vcfleet stand-in puzzles`); with
 *   `accuracy` each rollout draws, seeded, whether it answers the gold or a wrong answer, so the
 *   repeats of a task differ and two runs with other seeds or accuracies differ (for `compare`);
 * - `wrong`: a wrong answer every time; `slow`: the `right` answers after `delayMs` per call;
 * - `dead`: lists its model (so `run` starts) and answers every chat call 503.
 *
 * The draw of a rollout is made on its first call, from (seed, question, how many rollouts of that
 * question it began before) and carried in the bash command it writes (`# draw-<n>`), so that the
 * answering call reads it back from the conversation. A puzzle not of the demo (a BabyVision task)
 * gets a guess: an option letter, or a number from 1 to 9, drawn the same way.
 */
import { demoPuzzles, type DemoPuzzle } from './puzzles.ts';
import { scripts, toolTag, userText } from './scripted-policy-scripts.ts';
import type { ChatRequestBody, Script } from './scripted-policy-types.ts';

export const STAND_IN_BEHAVIOURS = ['right', 'wrong', 'slow', 'dead'] as const;
export type StandInBehaviour = (typeof STAND_IN_BEHAVIOURS)[number];

export interface StandInPolicyChoices {
  behaviour: StandInBehaviour;
  /** Probability of the gold answer per rollout on the demo puzzles; null: the demo's own answers. */
  accuracy: number | null;
  seed: number;
  /** Delay per call of `slow`. */
  delayMs: number;
}

/** A number in [0, 1) from the words (FNV-1a, then a xorshift mix): the same words, the same number. */
export function draw(...words: Array<string | number>): number {
  let h = 0x811c9dc5;
  for (const ch of words.join('\u0000')) {
    h ^= ch.codePointAt(0) ?? 0;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  return (h >>> 0) / 2 ** 32;
}

/** The option letters a prompt lists (`(A) …` lines, as prepare/prompts.ts writes them). */
function optionLetters(text: string): string[] {
  return [...text.matchAll(/^\(([A-Z])\) /gm)].map((m) => m[1]);
}

/** A wrong answer to a demo puzzle: another option, or the gold number plus one to three. */
function wrongAnswer(puzzle: DemoPuzzle, u: number): string {
  if (puzzle.ansType === 'choice') {
    const others = puzzle.options.map((_, i) => String.fromCharCode(65 + i)).filter((l) => l !== puzzle.gold);
    return others[Math.floor(u * others.length)];
  }
  return String(Number(puzzle.gold) + 1 + Math.floor(u * 3));
}

/** A guess at a puzzle the stand-in does not know. */
function guess(text: string, u: number): string {
  const letters = optionLetters(text);
  return letters.length ? letters[Math.floor(u * letters.length)] : String(1 + Math.floor(u * 9));
}

/** The stand-in policy's script. */
export function standInScript(choices: StandInPolicyChoices, puzzles: readonly DemoPuzzle[] = demoPuzzles()): Script {
  if (choices.behaviour === 'dead') {
    return () => ({ kind: 'error', status: 503, body: { error: { message: 'the stand-in policy was started with --behaviour dead', type: 'server_error' } } });
  }
  const begun = new Map<string, number>();
  const puzzleOf = (body: ChatRequestBody) => {
    const text = userText(body);
    return { text, puzzle: puzzles.find((p) => text.includes(p.question)) };
  };
  const key = (text: string, puzzle: DemoPuzzle | undefined) => puzzle?.question ?? text.slice(-400);
  const agent = scripts.agent({
    tag(body) {
      const { text, puzzle } = puzzleOf(body);
      const k = key(text, puzzle);
      const n = begun.get(k) ?? 0;
      begun.set(k, n + 1);
      return `draw-${n}`;
    },
    answer(body) {
      const { text, puzzle } = puzzleOf(body);
      const n = Number(/^draw-(\d+)$/.exec(toolTag(body) ?? '')?.[1] ?? 0);
      const u = draw(choices.seed, key(text, puzzle), n);
      if (!puzzle) return guess(text, u);
      if (choices.behaviour === 'wrong') return wrongAnswer(puzzle, u);
      if (choices.accuracy === null) return puzzle.policyAnswer;
      return u < choices.accuracy ? puzzle.gold : wrongAnswer(puzzle, draw(choices.seed, 'wrong', key(text, puzzle), n));
    },
  });
  if (choices.behaviour !== 'slow') return agent;
  return async (body, index, ctx) => {
    await new Promise((resolve) => setTimeout(resolve, choices.delayMs));
    return agent(body, index, ctx);
  };
}
