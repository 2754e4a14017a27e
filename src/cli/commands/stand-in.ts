/** `vcfleet stand-in policy|judge|puzzles`: a documented stand-in for the model and the judge (src/demo/stand-in.ts). */
import path from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../../shared/errors.ts';
import type { Cli } from '../context.ts';
import { onShutdownSignals, portFlag } from '../runtime.ts';
import { shellWord, vcfleetCommand } from '../../shared/text/advice.ts';
import { STAND_IN_BEHAVIOURS, type StandInBehaviour } from '../../demo/stand-in-policy.ts';
import { STAND_IN_JUDGE_MODEL, STAND_IN_POLICY_MODEL, STAND_IN_PORTS, startStandInJudge, startStandInPolicy, writeStandInPuzzles, type StandInServer } from '../../demo/stand-in.ts';

const WHATS = ['policy', 'judge', 'puzzles'] as const;
/** Where `stand-in puzzles` writes by default (relative to the working folder). */
export const STAND_IN_DATA_DIR = path.join('.vcfleet', 'stand-in', 'data');

interface StandInFlags {
  config?: string;
  port?: string;
  model?: string;
  behaviour: string;
  accuracy?: string;
  seed: string;
  delayMs: string;
  dataDir: string;
}

function number(flag: string, raw: string, ok: (n: number) => boolean, what: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new ConfigError(`${flag} must be ${what}, not "${raw}"`);
  return n;
}

function behaviourOf(what: string, raw: string): StandInBehaviour {
  const allowed = what === 'judge' ? STAND_IN_BEHAVIOURS.filter((b) => b !== 'wrong') : [...STAND_IN_BEHAVIOURS];
  if (!(allowed as string[]).includes(raw)) throw new ConfigError(`--behaviour of the stand-in ${what} must be one of ${allowed.join(', ')}, not "${raw}"`);
  return raw as StandInBehaviour;
}

/** Listen, or say what to do when the port is taken. */
async function started(start: () => Promise<StandInServer>, what: string, port: number): Promise<StandInServer> {
  try {
    return await start();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new ConfigError(`port ${port} is in use (another stand-in ${what}?): stop it, or pick another port, e.g. ${vcfleetCommand(`stand-in ${what} --port 0`)} (0 = any free port; the port chosen is printed)`);
    }
    throw err;
  }
}

/** The lines to paste into the shell that runs `vcfleet run` or `serve`. */
function pasteLines(what: 'policy' | 'judge', url: string, model: string): string {
  return what === 'policy' ? `  export POLICY_BASE_URL=${url} POLICY_MODEL=${model}` : `  export JUDGE_BASE_URL=${url}`;
}

async function serve(what: 'policy' | 'judge', opts: StandInFlags, cli: Cli): Promise<void> {
  const { logger } = cli.context(opts);
  const port = portFlag(opts.port) ?? STAND_IN_PORTS[what];
  const behaviour = behaviourOf(what, opts.behaviour);
  const delayMs = number('--delay-ms', opts.delayMs, (n) => Number.isInteger(n) && n >= 0, 'a whole number of milliseconds');
  const seed = number('--seed', opts.seed, Number.isInteger, 'a whole number');
  const accuracy = opts.accuracy === undefined ? null : number('--accuracy', opts.accuracy, (n) => n >= 0 && n <= 1, 'a probability from 0 to 1');
  if (what === 'judge' && opts.accuracy !== undefined) throw new ConfigError('--accuracy is a choice of the stand-in policy; the stand-in judge grades against the gold answer');
  const model = opts.model ?? (what === 'policy' ? STAND_IN_POLICY_MODEL : STAND_IN_JUDGE_MODEL);
  const host = '127.0.0.1';
  const server = await started(
    () => (what === 'policy'
      ? startStandInPolicy({ behaviour, accuracy, seed, delayMs, host, port, model })
      : startStandInJudge({ behaviour: behaviour as Exclude<StandInBehaviour, 'wrong'>, delayMs, host, port, model })),
    what,
    port,
  );
  const how = what === 'policy'
    ? behaviour === 'right' ? (accuracy === null ? "the demo's answers" : `right with probability ${accuracy} per rollout, seed ${seed}`) : behaviour
    : behaviour === 'right' ? 'grading against the gold answer' : behaviour;
  process.stdout.write(
    `stand-in ${what} (${how}${behaviour === 'slow' ? `, ${delayMs} ms per call` : ''}) on ${server.url}; Ctrl-C stops it.\n` +
      `In the shell of \`${vcfleetCommand('run')}\` or \`${vcfleetCommand('serve')}\`:\n${pasteLines(what, server.url, model)}\n`,
  );
  let shown = 0;
  const tick = setInterval(() => {
    const { calls, tokenCalls } = server.counts();
    if (calls === shown) return;
    shown = calls;
    process.stdout.write(`stand-in ${what}: ${calls} chat call${calls === 1 ? '' : 's'} answered${tokenCalls ? ` (${tokenCalls} with token ids)` : ''}\n`);
  }, 2000);
  await new Promise<void>((resolve) => {
    onShutdownSignals(logger, async () => {
      clearInterval(tick);
      await server.close();
      resolve();
    }, { stopping: `stopping the stand-in ${what}` });
  });
}

export function registerStandIn(program: Command, cli: Cli): void {
  program
    .command('stand-in')
    .description('a stand-in for the model or the judge on 127.0.0.1 (OpenAI-compatible), or the demo puzzles as a benchmark, to try run, compare and serve without a model')
    .argument('<what>', `${WHATS.join(', ')}`)
    .option('--port <n>', `port (default ${STAND_IN_PORTS.policy} for the policy, ${STAND_IN_PORTS.judge} for the judge; 0 = any free port)`)
    .option('--model <name>', `the model listed at GET /v1/models (default ${STAND_IN_POLICY_MODEL}, ${STAND_IN_JUDGE_MODEL})`)
    .option('--behaviour <kind>', `right, wrong (policy only), slow or dead (503 to every chat call)`, 'right')
    .option('--accuracy <p>', "policy: the gold answer with probability p per rollout (seeded; default: the demo's answers)")
    .option('--seed <n>', 'policy: the seed of --accuracy and of its guesses', '1')
    .option('--delay-ms <ms>', 'the delay per call of --behaviour slow', '2000')
    .option('--data-dir <dir>', 'puzzles: where to write them', STAND_IN_DATA_DIR)
    .option('--config <path>', 'config YAML (for the log settings)')
    .addHelpText('after', '\nWalkthroughs: docs/evaluate.md#trying-it-with-a-stand-in-model and docs/train.md#trying-serve-with-a-stand-in-model.')
    .action(async (what: string, opts: StandInFlags) => {
      if (what === 'puzzles') {
        const n = await writeStandInPuzzles(opts.dataDir, 'babyvision_opencode');
        process.stdout.write(`wrote the ${n} demo puzzles as the prepared benchmark ${path.join(opts.dataDir, 'babyvision_opencode')}; to run on them:\n  export VCFLEET_DATA_DIR=${shellWord(path.resolve(opts.dataDir))}\n`);
        return;
      }
      if (what !== 'policy' && what !== 'judge') throw new ConfigError(`stand-in needs one of ${WHATS.join(', ')}, not "${what}"`);
      await serve(what, opts, cli);
    });
}
