/**
 * What the gateway keeps of one rollout's text, bounded in total: the answers, reasoning, tool-call
 * arguments and tool outputs it records for the transcript. Everything comes from the sandbox or
 * from the model, so a rollout cannot make the worker hold more than MAX_KEPT_CHARS of it, however
 * many or large its calls: past the budget each piece keeps only its head and its tail (where an
 * answer is), and the transcript says so.
 */

/** Characters of text the gateway keeps per rollout. */
export const MAX_KEPT_CHARS = 16 * 1024 * 1024;
/** Kept of each piece once the budget is spent: its head, and its tail (the judge reads the end of the answers). */
const HEAD_CHARS = 200;

export class KeptText {
  private left: number;
  /** Some piece was cut to stay within the budget. */
  cut = false;

  constructor(budget = MAX_KEPT_CHARS) {
    this.left = budget;
  }

  /** `text` whole while the budget holds it, else its head and its last `tail` characters. */
  keep(text: string, tail = HEAD_CHARS): string {
    if (text.length <= this.left) {
      this.left -= text.length;
      return text;
    }
    // What is left of the budget goes to the tail; past it, the head and `tail` characters still are.
    const keepTail = Math.max(tail, this.left - HEAD_CHARS);
    if (text.length <= HEAD_CHARS + keepTail) {
      this.left = Math.max(0, this.left - text.length);
      return text;
    }
    this.cut = true;
    const end = keepTail > 0 ? text.slice(-keepTail) : '';
    const kept = `${text.slice(0, HEAD_CHARS)}\n[... ${text.length - HEAD_CHARS - keepTail} characters not kept: the rollout's transcript budget is spent ...]\n${end}`;
    this.left = Math.max(0, this.left - kept.length);
    return kept;
  }
}
