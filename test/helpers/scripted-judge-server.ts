/**
 * The scripted judge server lives in product code (the demo uses it); tests use it from here, and
 * share one set-up: `useScriptedJudge()` at the top of a `describe` (or file) starts it before the
 * first test and closes it after the last, so no test file writes that set-up and tear-down again.
 */
import { afterAll, beforeAll } from 'vitest';
import { startScriptedJudgeServer, type ScriptedJudgeServer, type ScriptedJudgeServerOptions } from '../../src/demo/scripted-judge-server.ts';

export * from '../../src/demo/scripted-judge-server.ts';

/**
 * A scripted judge for the enclosing `describe`: started in a `beforeAll` registered now (before the
 * hooks that follow, which may read its `url`), closed in an `afterAll` that runs after theirs.
 */
export function useScriptedJudge(options: ScriptedJudgeServerOptions = {}): ScriptedJudgeServer {
  let server: ScriptedJudgeServer | undefined;
  beforeAll(async () => {
    server = await startScriptedJudgeServer(options);
  });
  afterAll(async () => {
    await server?.close();
  });
  return new Proxy({} as ScriptedJudgeServer, {
    get(_target, key) {
      if (!server) throw new Error('the scripted judge is read before its beforeAll started it: call useScriptedJudge() before the hooks that use it');
      const value = Reflect.get(server, key, server) as unknown;
      return typeof value === 'function' ? value.bind(server) : value;
    },
  });
}
