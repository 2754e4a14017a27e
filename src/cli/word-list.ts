/** Lists of names as a sentence says them, for help texts and messages derived from the stage registry. */

/** "a, b or c" (or "a, b and c"). */
export function wordList(words: readonly string[], conjunction: 'and' | 'or'): string {
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} ${conjunction} ${words[words.length - 1]}`;
}

const SMALL = ['none', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'];

/** "three": a small count as a word (digits from ten). */
export function countWord(n: number): string {
  return SMALL[n] ?? String(n);
}
