/**
 * Benchmark 14, token chain: the eight multi-call cases of test/helpers/chain-cases.ts through the
 * real OpenCode against the server with Qwen3's real chat template and tokenizer
 * (test/helpers/qwen3-policy-server.ts), in three modes: plain (earlier turns as OpenCode sends them
 * back, a plain vLLM), restored (`policy.token_capture_restore_turns`, a plain vLLM) and spliced
 * (`policy.token_capture_splice`, a splicing server). Per mode: how many rollouts chain (contiguous
 * flat form), how many are trainable as steps (every answered call with its ids, unmasked), and in
 * splice mode how many flat forms equal, id for id, what the server fed and generated.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { discardLogger } from './lib/fleet.ts';
import { createSandboxProvider } from '../src/sandboxes/index.ts';
import type { Row } from '../src/shared/records/rows.ts';
import type { Trajectory } from '../src/shared/records/trajectory.ts';
import { stepRecords } from '../src/shared/output/step-records.ts';
import { CHAIN_CASES, runChain } from '../test/helpers/chain-cases.ts';
import { startQwen3PolicyServer, type Qwen3PolicyServer } from '../test/helpers/qwen3-policy-server.ts';
import { harnessConfig } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';

export interface TokenChainBenchOptions {
  dir: string;
  log?: (line: string) => void;
}

const MODES = [
  { name: 'plain vLLM, turns as OpenCode sends them', restoreTurns: false, splice: false },
  { name: 'plain vLLM, turns restored', restoreTurns: true, splice: false },
  { name: 'splicing server, ids carried', restoreTurns: true, splice: true },
] as const;

const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The flat form is, id for id, the last call's prompt as the server fed it and its generation. */
function flatIsFed(t: Trajectory, server: Qwen3PolicyServer): boolean {
  const last = server.turns.at(-1);
  return !!last && same(t.prompt_ids, server.turns[0].prompt) && same([...t.prompt_ids, ...t.response_ids], [...last.prompt, ...last.generation]);
}

export async function benchTokenChain(opts: TokenChainBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  const dir = mkdtempSync(path.join(opts.dir, 'token-chain-'));
  const config = harnessConfig();
  const logger = discardLogger('warn');
  const provider = createSandboxProvider(config, { logger });
  const server = await startQwen3PolicyServer(() => 'unused');
  const rows: BenchRow[] = [];
  try {
    for (const mode of MODES) {
      const chained: number[] = [];
      let steps = 0;
      let fed = 0;
      for (const c of CHAIN_CASES) {
        server.setScript(c.script);
        server.switches.reasoningField = c.reasoningField;
        server.switches.splice = mode.splice;
        server.turns.length = 0;
        const result = await runChain({ provider, logger, root: dir, url: server.url, id: `chain-${c.id}-${mode.restoreTurns ? 'r' : 'p'}${mode.splice ? 's' : ''}`, ...mode });
        const t = result.trajectory?.record;
        if (!t || result.outcome.stop_reason !== 'answered') throw new Error(`case ${c.id} (${mode.name}) ended ${result.outcome.stop_reason}: ${result.outcome.error ?? ''}`);
        if (t.chain.contiguous) chained.push(c.id);
        const row = { run_id: t.run_id, rollout_id: t.rollout_id, task_id: t.task_id, repeat: 0, reward: 1, failure_kind: null, token_capture: null } as unknown as Row;
        const s = stepRecords(row, t, () => 'image');
        if (s.ok && !s.truncated && !t.mask_sample && s.records.length === server.turns.length && s.records.every((r, i) => same(r.prompt_token_ids, server.turns[i].prompt))) steps++;
        if (t.chain.contiguous && flatIsFed(t, server)) fed++;
        log(`  ${mode.name}: case ${c.id} (${c.name}) ${t.chain.contiguous ? 'chains' : `breaks: ${t.chain.breaks[0]?.why ?? ''}`}`);
      }
      const broken = CHAIN_CASES.filter((c) => !chained.includes(c.id)).map((c) => c.id);
      rows.push({
        bench: '14 token chain', metric: `contiguous rollouts, ${mode.name}`, value: `${chained.length} / ${CHAIN_CASES.length}`,
        ...(mode.restoreTurns ? { target: mode.splice ? '8 / 8' : '>= 6 / 8', ok: chained.length >= (mode.splice ? 8 : 6) && (!mode.splice || fed === 8) } : {}),
        note: `chained: ${chained.join(', ') || 'none'}; broken: ${broken.join(', ') || 'none'}; trainable as steps (each call's ids as the server saw them): ${steps} / ${CHAIN_CASES.length}` +
          (mode.splice ? `; flat form equal, id for id, to what the server fed and generated: ${fed} / ${CHAIN_CASES.length}` : ''),
      });
    }
    return rows;
  } finally {
    await server.close();
    await provider.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
