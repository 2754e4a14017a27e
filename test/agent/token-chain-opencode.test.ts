/**
 * The token chain with Qwen3's real chat template and tokenizer (test/helpers/qwen3-policy-server.ts)
 * and the real OpenCode in a real `local` sandbox, over the eight multi-call cases of
 * test/helpers/chain-cases.ts. As OpenCode sends them back, the compact JSON, thinking and text
 * beside a call break the chain; with the earlier turns restored (`policy.token_capture_restore_turns`)
 * all but the compact JSON (3) and thinking with a `read` (7) chain; splicing
 * (`policy.token_capture_splice`) chains those two, the flat form equal, id for id, to what the
 * server fed and generated. A broken chain never masks: the steps keep every call.
 * (The share over all eight cases in each mode is `npm run bench -- --only 14`.)
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import type { Row } from '../../src/shared/records/rows.ts';
import type { Trajectory } from '../../src/shared/records/trajectory.ts';
import { stepRecords } from '../../src/shared/output/step-records.ts';
import { tokenRecord } from '../../src/shared/output/token-record.ts';
import { CHAIN_CASES, CHAIN_KEY, runChain, type ChainCase } from '../helpers/chain-cases.ts';
import { startQwen3PolicyServer, type Qwen3PolicyServer } from '../helpers/qwen3-policy-server.ts';
import { passableTmpDir } from '../helpers/tmp.ts';

const ROOT = passableTmpDir('vcfleet-chain-test-');

/** The row fields the exports read (the rest of a row does not matter to them). */
const rowOf = (t: Trajectory) => ({ run_id: t.run_id, rollout_id: t.rollout_id, task_id: t.task_id, repeat: 0, reward: 1, failure_kind: null, token_capture: null }) as unknown as Row;

describe('the token chain with the real Qwen3 template through the real OpenCode', () => {
  const logger = createLogger({ level: 'warn', secrets: [CHAIN_KEY], name: 'chain-test' });
  let provider: LocalBwrapProvider;
  let server: Qwen3PolicyServer;
  let n = 0;

  beforeAll(async () => {
    provider = new LocalBwrapProvider({ rootDir: path.join(ROOT, 'sandboxes'), workdir: '/workspace', extraRoBinds: opencodeRoBinds(ConfigSchema.parse({})), logger });
    server = await startQwen3PolicyServer(() => 'unused');
  });
  afterAll(async () => {
    await provider.close();
    await server.close();
    rmSync(ROOT, { recursive: true, force: true });
  });

  async function run(c: ChainCase, mode: { restoreTurns: boolean; splice: boolean }) {
    server.setScript(c.script);
    server.switches.reasoningField = c.reasoningField;
    server.switches.splice = mode.splice;
    server.turns.length = 0;
    server.requests.length = 0;
    const result = await runChain({ provider, logger, root: ROOT, url: server.url, id: `case-${c.id}-${++n}`, ...mode });
    expect(result.outcome, JSON.stringify(result.outcome)).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', tool_calls: 1 });
    const t = result.trajectory!.record;
    expect(t.mask_sample).toBe(false);
    expect(t.calls.filter((x) => x.answered)).toHaveLength(2);
    // Whatever the chain did, the steps hold each call as the server saw it.
    const steps = stepRecords(rowOf(t), t, () => '/img.png');
    expect(steps.ok && steps.records.map((s) => [s.prompt_token_ids, s.generation_token_ids])).toEqual(server.turns.map((x) => [x.prompt, x.generation]));
    return t;
  }

  const byId = (id: number) => CHAIN_CASES.find((c) => c.id === id)!;

  it('as OpenCode sends the turns back, text beside a call breaks the chain: contiguous false, not masked, the flat form the first call', async () => {
    const t = await run(byId(8), { restoreTurns: false, splice: false });
    expect(t.chain.contiguous).toBe(false);
    expect(t.chain.breaks[0].why).toMatch(/differs .* at token \d+/);
    expect(t.flat_calls).toBe(1);
    const flat = tokenRecord(rowOf(t), t, () => '/img.png');
    expect(flat.ok && flat.record).toMatchObject({ contiguous: false, mask_sample: false, reward: 1 });
  }, 120_000);

  it('with the turns restored, all but the compact JSON (3) and thinking with a read (7) chain', async () => {
    const chained: number[] = [];
    for (const c of CHAIN_CASES) if ((await run(c, { restoreTurns: true, splice: false })).chain.contiguous) chained.push(c.id);
    expect(chained).toEqual([1, 2, 4, 5, 6, 8]);
  }, 900_000);

  it('splicing chains the compact JSON and thinking with a read, the flat form being what the server fed and generated', async () => {
    for (const id of [3, 7]) {
      const t = await run(byId(id), { restoreTurns: true, splice: true });
      expect(server.turns.map((x) => x.spliced)).toEqual([false, true]);
      expect(t.chain.contiguous).toBe(true);
      const [first, last] = server.turns;
      expect(t.prompt_ids).toEqual(first.prompt);
      expect([...t.prompt_ids, ...t.response_ids]).toEqual([...last.prompt, ...last.generation]);
      // The earlier assistant turn carried NeMo Gym's fields upstream.
      const assistant = (server.requests[1].messages as Array<Record<string, unknown>>).find((m) => m.role === 'assistant')!;
      expect(assistant).toMatchObject({ prompt_token_ids: first.prompt, generation_token_ids: first.generation });
    }
  }, 300_000);
});
