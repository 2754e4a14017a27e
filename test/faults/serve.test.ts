/**
 * `vcfleet serve` loses no accepted request: a sandbox-worker SIGKILLed in the middle of its rollouts
 * (BullMQ gives the stalled jobs to another), and serve itself SIGKILLed while its clients wait and
 * started again with the same --run-id (everything it keeps is in Redis): every client gets its
 * result from the new serve with `GET /rollouts/{id}`, and each rollout has exactly one row. Every
 * role is its own `vcfleet` process (the scripted agent, the real judge client against the scripted
 * judge server).
 */
import { describe, expect, it } from 'vitest';
import { openQueue } from '../../src/shared/queue/registry.ts';
import { waitFor, type CliProcess } from '../helpers/fleet.ts';
import { countLines, readJsonl } from './fault-helpers.ts';
import { faultFleet } from './fault-fleet.ts';
import { gymRow, pngUrl } from '../helpers/serve.ts';

type Json = Record<string, any>;

describe('serve under faults', () => {
  const f = faultFleet();

  const urlOf = async (p: CliProcess) =>
    waitFor('serve to print its URL', () => /serve: (http:\/\/\S+\/) /.exec(p.stdout())?.[1], 60_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${p.output()}`);
    });

  it('a SIGKILLed sandbox-worker and a SIGKILLed serve lose no accepted request: each client gets its result, one row each', async () => {
    // Each scripted rollout takes 4 s: the kill lands while they run.
    const env = await f.env({ rows: 1, script: { '*': { answer: '@gold', delay_ms: 4000 } }, overrides: ['++queues.rollout_concurrency=4'] });
    const runId = 'serve-faults';
    const args = [...env.overrides, '--run-id', runId];
    const serve = f.start(['serve', '--port', '0', ...args]);
    const url = await urlOf(serve);
    const victim = f.start(['worker', 'sandbox', ...args]);
    f.start(['worker', 'judge', ...args]);
    f.start(['worker', 'results', ...args]);
    const golds = ['A', 'B', 'C', 'D', '12', 'left'];
    const bodies = golds.map((g, i) => gymRow(`Puzzle ${i}: which?`, g, { _ng_rollout_id: `f-${i}` }, [pngUrl(i + 1)]));
    // The clients: each POST /run; a dropped connection makes it ask again by id, wherever serve is.
    const answers = bodies.map((b) => fetch(`${url}run`, { method: 'POST', body: JSON.stringify(b), headers: { 'content-type': 'application/json' } }).then(async (r) => ({ status: r.status, json: (await r.json()) as Json }), (err: Error) => err));
    const rollouts = openQueue('rollout', f.redis, env.prefix, { scope: runId });
    await waitFor('rollouts running on the victim', async () => (await rollouts.getActiveCount()) >= 2, 60_000, 50);
    victim.child.kill('SIGKILL');
    await victim.exited;
    serve.child.kill('SIGKILL');
    await serve.exited;
    // Every client lost its connection with serve.
    for (const a of await Promise.all(answers)) expect(a).toBeInstanceOf(Error);
    f.start(['worker', 'sandbox', ...args]);
    const again = f.start(['serve', '--port', '0', ...args]);
    const url2 = await urlOf(again);
    const results = await Promise.all(golds.map(async (_, i) => {
      const res = await fetch(`${url2}rollouts/f-${i}`);
      return { status: res.status, json: (await res.json()) as Json };
    }));
    for (const [i, r] of results.entries()) {
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.json).toMatchObject({ reward: 1, expected_answer: golds[i], extracted_answer: golds[i], _ng_rollout_id: `f-${i}`, mask_sample: false });
    }
    await waitFor('6 rows', () => countLines(env.output) >= 6, 60_000, 250);
    const rows = readJsonl(env.output);
    expect(rows.map((r) => r.rollout_id).sort()).toEqual(golds.map((_, i) => `${runId}-ng-f-${i}`).sort());
    expect(await f.redis.hlen(`${env.prefix}:run:${runId}:rows`)).toBe(6);
    await rollouts.close();
  }, 240_000);
});
