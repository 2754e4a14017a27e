/**
 * `vcfleet stand-in policy|judge`: the demo's scripted policy (stand-in-policy.ts, with the token
 * fields of stand-in-tokens.ts when asked) and its scripted judge (the scoring contract's verdict
 * JSON, graded against the gold answer the judge prompt carries) on a port of their own, until
 * stopped; and `vcfleet stand-in puzzles`, the demo puzzles written as a prepared benchmark.
 */
import { startScriptedJudgeServer, type JudgeScript } from './scripted-judge-server.ts';
import { startScriptedPolicyServer } from './scripted-policy-server.ts';
import { standInScript, type StandInBehaviour, type StandInPolicyChoices } from './stand-in-policy.ts';
import { asksForTokenIds, tokenCompletion } from './stand-in-tokens.ts';
import { demoPuzzles, writeDemoBenchmark } from './puzzles.ts';
import type { BenchmarkName } from '../shared/config/load.ts';

/** Default ports (documented in docs/evaluate.md): the policy's, then the judge's. */
export const STAND_IN_PORTS = { policy: 8010, judge: 8011 } as const;
export const STAND_IN_POLICY_MODEL = 'stand-in-vlm';
export const STAND_IN_JUDGE_MODEL = 'stand-in-judge';

export interface StandInServer {
  /** Base URL ending in `/v1`. */
  url: string;
  /** Chat calls answered so far (token-id answers among them). */
  counts(): { calls: number; tokenCalls: number };
  close(): Promise<void>;
}

export async function startStandInPolicy(choices: StandInPolicyChoices & { host: string; port: number; model: string }): Promise<StandInServer> {
  let tokenCalls = 0;
  const server = await startScriptedPolicyServer({
    script: standInScript(choices),
    modelName: choices.model,
    host: choices.host,
    port: choices.port,
    completion(body, reply, index) {
      if (!asksForTokenIds(body)) return null;
      tokenCalls++;
      return tokenCompletion(body, reply, index, choices.model);
    },
  });
  return {
    url: server.url,
    counts: () => ({ calls: server.requests.filter((r) => r.path.endsWith('/chat/completions')).length, tokenCalls }),
    close: server.close,
  };
}

/** The judge's script: grade (the default grader of scripted-judge-server.ts), after `delayMs` when slow; 503 when dead. */
export function standInJudgeScript(behaviour: Exclude<StandInBehaviour, 'wrong'>, delayMs: number): JudgeScript {
  if (behaviour === 'dead') return () => ({ status: 503, body: { error: { message: 'the stand-in judge was started with --behaviour dead', type: 'server_error' } } });
  if (behaviour === 'slow') return () => new Promise((resolve) => setTimeout(() => resolve('grade'), delayMs));
  return () => 'grade';
}

export async function startStandInJudge(o: { behaviour: Exclude<StandInBehaviour, 'wrong'>; delayMs: number; host: string; port: number; model: string }): Promise<StandInServer> {
  const server = await startScriptedJudgeServer({ script: standInJudgeScript(o.behaviour, o.delayMs), host: o.host, port: o.port, modelName: o.model });
  return {
    url: server.url,
    counts: () => ({ calls: server.requests.length, tokenCalls: 0 }),
    close: server.close,
  };
}

/** Write the demo puzzles as the prepared benchmark `<dataDir>/<benchmark>`; returns how many. */
export async function writeStandInPuzzles(dataDir: string, benchmark: BenchmarkName): Promise<number> {
  const puzzles = demoPuzzles();
  await writeDemoBenchmark(dataDir, benchmark, puzzles);
  return puzzles.length;
}
