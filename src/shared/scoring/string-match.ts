/**
 * `string_match_reward`: the extracted answer graded against the gold without a judge, by the
 * reference's string-match rules. A diagnostic beside the reward, never the reward: where the two
 * disagree, either the judge was persuaded by the model's text or the answer is written in a form a
 * string cannot compare (metrics count the disagreements).
 *
 * Both sides are NFKC-normalised, lower-cased, stripped of one pair of outer quotes and of trailing
 * `.`, `!`, `?`. Then they match (1.0) when equal, equal as numbers, equal once thousands separators
 * are removed, equal once LaTeX wrappers (`\text{}`, `\mathrm{}`, `\boxed{}`, ..., `$`, `\(`) are
 * removed, or equal as lists (`,` `;` `and` `or` as separators). Numbers within about 1% of each
 * other give 0.98. Anything else, and no extracted answer, is 0.0. Pure; this file imports nothing.
 */

/** Commands whose braces are dropped, their content kept (`\text{B}` -> `B`). */
const LATEX_WRAPPERS = [
  '\\boxed', '\\text', '\\textbf', '\\textit', '\\texttt', '\\mathrm', '\\mathbf', '\\mathit', '\\mathsf', '\\mathbb', '\\mathcal', '\\emph', '\\url',
];
/** A plain decimal number (what the reference's float() accepts, less its oddities: no `inf`, no `_`). */
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i;
/** The closest the two numbers' relative error leaves the reference's squared score above 0.98. */
const NEAR_SCORE = 0.98;

function stripOuterQuotes(text: string): string {
  return text.length >= 2 && text[0] === text[text.length - 1] && (text[0] === '"' || text[0] === "'") ? text.slice(1, -1) : text;
}

function stripTrailingPunctuation(text: string): string {
  const stripped = text.replace(/[.!?]+$/, '');
  return stripped === '' ? text : stripped;
}

function normalise(text: string): string {
  return stripTrailingPunctuation(stripOuterQuotes(text.normalize('NFKC')).toLowerCase());
}

const squeeze = (text: string): string => text.split(/\s+/).filter(Boolean).join(' ');

function asNumber(text: string): number | null {
  const t = text.trim();
  return DECIMAL.test(t) ? Number(t) : null;
}

/** Equal as numbers, with `$` and `\%` ignored. */
function sameNumber(a: string, b: string): boolean {
  const clean = (s: string) => s.replaceAll('\\%', '').replaceAll('\\$', '').replaceAll('$', '');
  const [x, y] = [asNumber(clean(a)), asNumber(clean(b))];
  return x !== null && y !== null && x === y;
}

/** `1,000,000` -> `1000000` (a comma between digits), `\%` -> `%`. */
function withoutThousands(text: string): string {
  return text.replace(/(?<=\d),(?=\d)/g, '').replaceAll('\\%', '%');
}

/** Drop `cmd{` and its matching `}` everywhere, keeping what is between; an unclosed group keeps its content. */
function removeCommand(cmd: string, text: string): string {
  const open = `${cmd}{`;
  let out = text;
  for (let at = out.indexOf(open); at >= 0; at = out.indexOf(open, at)) {
    let depth = 1;
    let i = at + open.length;
    for (; i < out.length && depth > 0; i++) {
      if (out[i] === '{') depth++;
      else if (out[i] === '}') depth--;
    }
    const inner = depth === 0 ? out.slice(at + open.length, i - 1) : out.slice(at + open.length);
    out = out.slice(0, at) + inner + (depth === 0 ? out.slice(i) : '');
  }
  return out;
}

function withoutLatex(text: string): string {
  let out = text;
  for (const cmd of LATEX_WRAPPERS) out = removeCommand(cmd, out);
  for (const token of ['\\(', '\\)', '\\[', '\\]', '$']) out = out.replaceAll(token, '');
  return squeeze(out);
}

/** `A, C and D` -> `a c d`: list separators as spaces. */
function asList(text: string): string {
  return squeeze(text.replace(/[,;]/g, ' ').replace(/\b(?:and|or)\b/g, ' '));
}

/** The numeric value with currency, percent signs and thousands commas removed. */
function looseNumber(text: string): number | null {
  return asNumber(text.replace(/[$£€%,]/g, '').replaceAll('\\', ''));
}

/** Numbers within ~1% of each other (the reference's `(1 - relative error)^2 > 0.98`). */
function nearNumber(gold: string, pred: string): boolean {
  const [g, p] = [looseNumber(gold), looseNumber(pred)];
  if (g === null || p === null) return false;
  const relative = Math.abs(p - g) / Math.max(Math.abs(g), 1e-9);
  return Math.max(0, 1 - relative) ** 2 > NEAR_SCORE;
}

/** The string-match grade of `extracted` against `gold`: 1.0, 0.98 or 0.0 (0.0 when nothing was extracted). */
export function stringMatchReward(gold: string, extracted: string | null): number {
  if (extracted === null) return 0;
  const [g, p] = [normalise(gold), normalise(extracted)];
  if (p === g || sameNumber(p, g)) return 1;
  if (withoutThousands(p) === withoutThousands(g)) return 1;
  const [lg, lp] = [withoutLatex(g), withoutLatex(p)];
  if (lp === lg || asList(lp) === asList(lg) || asList(p) === asList(g)) return 1;
  return nearNumber(lg, lp) ? NEAR_SCORE : 0;
}
