/**
 * What a process must release when it stops, in one place: every step is registered as it is
 * acquired and released last-in-first-out (connections after the workers that use them, servers
 * after the roles behind them). Every step runs even if an earlier one failed; each failure is
 * logged with what it was, and the first is rethrown at the end. Releasing twice does nothing more.
 */
import { errorMessage } from './errors.ts';
import type { Logger } from './logger.ts';

export class Releasers {
  private readonly steps: Array<{ what: string; release: () => unknown }> = [];
  private releasing: Promise<void> | null = null;

  constructor(private readonly logger: Logger) {}

  /** Register a step (`what` names it in the log: "close the Redis connection"). */
  add(what: string, release: () => unknown): void {
    this.steps.push({ what, release });
  }

  /** Release every step, newest first; rethrows the first failure once all have run. */
  release(): Promise<void> {
    this.releasing ??= (async () => {
      let first: unknown = undefined;
      for (const step of this.steps.splice(0).reverse()) {
        try {
          await step.release();
        } catch (err) {
          this.logger.error({ step: step.what, err: errorMessage(err) }, `could not ${step.what}`);
          first ??= err;
        }
      }
      if (first !== undefined) throw first;
    })();
    return this.releasing;
  }
}
