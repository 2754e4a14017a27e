/** Child processes of the benchmarks: a TypeScript file run through bin/run-ts.js, messages over IPC. */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface TsChild<M> {
  child: ChildProcess;
  messages: M[];
  /** Resolves with the first message that matches, rejects if the child exits first. */
  next(match: (m: M) => boolean): Promise<M>;
  exited: Promise<number | null>;
}

export function forkTs<M>(file: string, args: string[], execArgv: string[] = []): TsChild<M> {
  const child = fork(path.join(ROOT, 'bin/run-ts.js'), [path.resolve(ROOT, file), ...args], {
    cwd: ROOT,
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const messages: M[] = [];
  const listeners = new Set<() => void>();
  child.on('message', (m) => {
    messages.push(m as M);
    for (const l of listeners) l();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    messages,
    exited,
    next(match) {
      return new Promise<M>((resolve, reject) => {
        const check = () => {
          const hit = messages.find(match);
          if (hit) {
            listeners.delete(check);
            resolve(hit);
          }
        };
        listeners.add(check);
        check();
        void exited.then((code) => {
          if (listeners.has(check)) reject(new Error(`${file} exited (${code}) before sending the expected message`));
        });
      });
    },
  };
}
