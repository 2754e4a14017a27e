/**
 * The preflight of `policy.token_capture_splice` (src/ops/splice-check.ts) against the server with
 * Qwen3's real template and tokenizer: splicing on, it continues from the carried ids and passes;
 * off (a plain vLLM), it re-renders the earlier turn and the preflight says so, naming the fix; an
 * unreachable server is named as such. It reads the run's policy section: a run that asks for no
 * splicing is not checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSplice, serverSplices } from '../../src/ops/splice-check.ts';
import { startQwen3PolicyServer, type Qwen3PolicyServer } from '../helpers/qwen3-policy-server.ts';

/** A run's policy section that asks for splicing (the preflight reads the run's, never the host's). */
const SPLICING = { token_capture: true, token_capture_splice: true };

describe('the splice preflight', () => {
  let server: Qwen3PolicyServer;
  beforeAll(async () => {
    server = await startQwen3PolicyServer(() => 'pong');
  });
  afterAll(async () => {
    await server.close();
  });

  it('passes a splicing server and names a plain one, with what to do', async () => {
    server.switches.splice = true;
    expect(await serverSplices(server.url, null, 'qwen3')).toBe(true);
    expect(await checkSplice(SPLICING, server.url, null, 'qwen3')).toBeNull();
    expect(server.turns.at(-1)!.spliced).toBe(true);
    server.switches.splice = false;
    expect(await serverSplices(server.url, null, 'qwen3')).toBe(false);
    const failure = await checkSplice(SPLICING, server.url, 'sk-secret-splice', 'qwen3');
    expect(failure?.message).toMatch(/did not continue from the token ids .* it does not splice/);
    expect(failure?.message).toContain('++policy.token_capture_splice=false');
    expect(failure?.message).not.toContain('sk-secret-splice');
  });

  it("reads the run's policy section: a run that does not splice, or captures no tokens, is not checked", async () => {
    server.switches.splice = false;
    const before = server.turns.length;
    expect(await checkSplice({ token_capture: true, token_capture_splice: false }, server.url, null, 'qwen3')).toBeNull();
    expect(await checkSplice({ token_capture: false, token_capture_splice: true }, server.url, null, 'qwen3')).toBeNull();
    expect(server.turns.length).toBe(before);
  });

  it('names an unreachable server', async () => {
    expect((await checkSplice(SPLICING, 'http://127.0.0.1:9/v1', null, 'qwen3'))?.message).toMatch(/unreachable/);
  });
});
