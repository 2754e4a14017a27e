/** The commands a sandbox is running, so that destroying it can wait for every one to end. */
import { DataError, InfraError } from '../shared/errors.ts';
import type { ExecResult } from './types.ts';

export class ExecTracker {
  private readonly running = new Set<Promise<ExecResult>>();

  /** Check a command may start in sandbox `id`, then track `start()` until it ends. */
  async track(id: string, destroyed: boolean, argv: readonly string[], start: () => Promise<ExecResult>): Promise<ExecResult> {
    if (destroyed) throw new InfraError(`sandbox ${id} is destroyed`);
    if (argv.length === 0) throw new DataError('exec needs a command');
    const run = start();
    this.running.add(run);
    try {
      return await run;
    } finally {
      this.running.delete(run);
    }
  }

  /** Resolves when every tracked command has ended (however it ended). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}
