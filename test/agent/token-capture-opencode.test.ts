/**
 * Token capture with the real OpenCode binary in a real `local` sandbox against a vLLM-shaped
 * scripted server with a toy tokenizer (test/helpers/vllm-policy-server.ts): OpenCode streams, the
 * gateway asks upstream without streaming for the token fields and streams to OpenCode itself. The
 * conversation reads the puzzle image, runs bash, and answers; the trajectory's chain, masks and
 * lengths are checked against the toy tokenizer's own rendering of what OpenCode sent, and a server
 * whose template drifts breaks the chain (not contiguous, never masked).
 */
import { rolloutPolicy } from '../helpers/policy.ts';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutRequest } from '../../src/shared/ports/agent.ts';
import { ConfigSchema } from '../../src/shared/config/load.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { opencodeRoBinds } from '../../src/sandboxes/local/opencode-binary.ts';
import { createOpenCodeRunner } from '../../src/agent/opencode-runner.ts';
import { LocalBwrapProvider } from '../../src/sandboxes/local/provider.ts';
import { encodePng } from '../helpers/fixture-images.ts';
import { toolResults, type Script } from '../helpers/scripted-policy-server.ts';
import { passableTmpDir } from '../helpers/tmp.ts';
import { IMAGE_TOKENS, SPECIAL, renderPrompt, startVllmPolicyServer, toyLogprob, type VllmPolicyServer } from '../helpers/vllm-policy-server.ts';

const KEY = 'sk-policy-secret-token-capture';
const ROOT = passableTmpDir('vcfleet-tc-test-');
const IMAGE = Buffer.from(encodePng(40, 30, (x) => (x < 20 ? [200, 20, 20] : [20, 20, 200])));
const SHA = createHash('sha256').update(IMAGE).digest('hex');

/** Read the puzzle image, run bash, then answer; each step with text, so drift (text of earlier turns dropped) shows. */
const readBashAnswer: Script = (body) => {
  const n = toolResults(body);
  if (n === 0) return { kind: 'tool_calls', text: 'Let me look at the picture.', calls: [{ name: 'read', arguments: { filePath: 'puzzle.png' } }] };
  if (n === 1) return { kind: 'tool_calls', text: 'Now a quick check.', calls: [{ name: 'bash', arguments: { command: 'echo left-is-red', description: 'Say it' } }] };
  return { kind: 'text', text: 'The left half is red. \\boxed{B}' };
};

describe('token capture through the real OpenCode', () => {
  const logger = createLogger({ level: 'warn', secrets: [KEY], name: 'tc-test' });
  let provider: LocalBwrapProvider;
  let server: VllmPolicyServer;
  let n = 0;

  beforeAll(async () => {
    provider = new LocalBwrapProvider({ rootDir: path.join(ROOT, 'sandboxes'), workdir: '/workspace', extraRoBinds: opencodeRoBinds(ConfigSchema.parse({})), logger });
    server = await startVllmPolicyServer(readBashAnswer);
  });
  afterAll(async () => {
    await provider.close();
    await server.close();
    rmSync(ROOT, { recursive: true, force: true });
  });

  function request(transcriptImageBytes = 32 * 1024 * 1024): RolloutRequest {
    n++;
    return {
      runId: 'run-tc', rolloutId: `task-${n}:r0`, repeat: 0, attempt: 1,
      task: {
        task_id: `task-${n}`, benchmark: 'babyvision_opencode', gold: 'B', type: 't', subtype: 's', prompt: 'Which half is red? (A) right (B) left. Answer \\boxed{X}.',
        question: 'Which half is red?', ans_type: 'choice', options: ['right', 'left'], image_sha256: SHA, image_mime: 'image/png', image_file: 'x.png',
      },
      image: { bytes: IMAGE, mime: 'image/png', sha256: SHA },
      policy: rolloutPolicy(server.url, {
        apiKey: KEY, model: 'toy',
        settings: { context_window: 64000, max_output_tokens: 2048, request_timeout_s: 60, max_request_mib: 64, max_calls_per_rollout: 100, token_capture: true, sampling: { temperature: 0.7, top_k: 20 }, weight_version: 'step-42' },
      }),
      timeoutS: 100, agent: { max_tool_calls: 50 }, captureDir: path.join(ROOT, 'captures'),
      transcript: { enabled: true, imageBudgetBytes: transcriptImageBytes },
    };
  }

  async function run(transcriptImageBytes?: number) {
    server.requests.length = 0;
    const runner = createOpenCodeRunner({ config: ConfigSchema.parse({ policy_api_key: KEY }), logger, provider, socketDir: path.join(ROOT, 'sockets') });
    try {
      return await runner.run(request(transcriptImageBytes), new AbortController().signal);
    } finally {
      await runner.close();
    }
  }

  it('the chain holds: flat ids are the last prompt after the first plus the last generation, masks and log-probabilities line up, images in order', async () => {
    const result = await run();
    expect(result.outcome).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', tool_calls: 2 });
    const t = result.trajectory!.record;
    expect(result.outcome.token_capture).toEqual({ calls: 3, contiguous: true, mask_sample: false, mask_reason: null });
    expect(t).toMatchObject({ mask_sample: false, mask_reason: null, flat_calls: 3, weight_version: 'step-42', stop_reason: 'answered' });
    // The gateway asked upstream without streaming, with vLLM's fields and the run's sampling over OpenCode's.
    for (const body of server.requests) {
      expect(body).toMatchObject({ stream: false, logprobs: true, top_logprobs: 0, return_token_ids: true, return_tokens_as_token_ids: true, temperature: 0.7, top_k: 20 });
      expect(body.stream_options).toBeUndefined();
    }
    expect(t.calls.map((c) => c.sampling)).toEqual(Array(3).fill({ temperature: 0.7, top_k: 20 }));
    // What the toy tokenizer renders of what OpenCode sent is what the trajectory holds.
    const prompts = server.requests.map((b) => renderPrompt(b.messages ?? []));
    expect(t.prompt_ids).toEqual(prompts[0]);
    const last = t.calls.at(-1)!;
    expect(t.response_ids).toEqual([...prompts[2].slice(prompts[0].length), ...last.generation_token_ids!]);
    expect(t.response_mask).toHaveLength(t.response_ids.length);
    expect(t.response_logprobs).toHaveLength(t.response_ids.length);
    t.response_ids.forEach((id, i) => expect(t.response_logprobs[i]).toBe(t.response_mask[i] === 1 ? toyLogprob(id) : 0));
    // Generated tokens are masked 1 and end each turn with end-of-turn; the rest is the environment's.
    const generated = t.turns.reduce((s, x) => s + x.generated, 0);
    expect(t.response_mask.filter((m) => m === 1)).toHaveLength(generated);
    expect(t.turns.map((x) => x.inserted)).toEqual([prompts[0].length, prompts[1].length - prompts[0].length - t.turns[0].generated, prompts[2].length - prompts[1].length - t.turns[1].generated]);
    for (const c of t.calls) expect(c.generation_token_ids!.at(-1)).toBe(SPECIAL.end);
    // The puzzle entered with the first call, the image `read` returned with the second.
    expect(t.calls[0].images).toEqual([SHA]);
    expect(t.calls[1].images).toHaveLength(1);
    expect(t.images).toEqual([SHA, t.calls[1].images[0]]);
    const inserted1 = t.calls[1].inserted_token_ids!;
    expect(inserted1.filter((x) => x === SPECIAL.image)).toHaveLength(IMAGE_TOKENS);
    expect(result.trajectory!.images.has(t.calls[1].images[0])).toBe(true);
    expect(JSON.stringify(t)).not.toContain(KEY);
  });

  it('a template that renders earlier assistant turns differently breaks the chain: contiguous false with where and why, not masked', async () => {
    server.switches.drift = true;
    try {
      const result = await run();
      const t = result.trajectory!.record;
      expect(result.outcome.stop_reason).toBe('answered');
      expect(t.mask_sample).toBe(false);
      expect(t.mask_reason).toBeNull();
      expect(t.chain.contiguous).toBe(false);
      expect(t.chain.breaks[0]).toMatchObject({ call: 1 });
      expect(t.chain.breaks[0].why).toMatch(/differs .* at token \d+/);
      expect(t.flat_calls).toBe(1);
      expect(t.response_ids).toEqual(t.calls[0].generation_token_ids);
      expect(result.outcome.token_capture).toMatchObject({ contiguous: false, mask_sample: false, mask_reason: null });
    } finally {
      server.switches.drift = false;
    }
  });

  it('the images the model showed itself reach the trajectory past the transcript\'s image budget (they have their own)', async () => {
    const PIL = "from PIL import Image; Image.new('RGB', (9, 7), (1, 2, 3)).save('crop.png')";
    server.setScript((body) => {
      const k = toolResults(body);
      if (k === 0) return { kind: 'tool_calls', text: 'Make a crop.', calls: [{ name: 'bash', arguments: { command: `python3 -c "${PIL}"`, description: 'Crop' } }] };
      if (k === 1) return { kind: 'tool_calls', text: 'Look at it.', calls: [{ name: 'read', arguments: { filePath: 'crop.png' } }] };
      return { kind: 'text', text: '\\boxed{B}' };
    });
    try {
      const result = await run(1);
      const t = result.trajectory!.record;
      const shown = t.images.find((sha) => sha !== SHA)!;
      expect(shown).toBeDefined();
      expect(result.transcript!.images.has(shown)).toBe(false);
      expect(result.trajectory!.images.get(shown)?.bytes.length).toBeGreaterThan(0);
      expect(t).toMatchObject({ mask_sample: false, mask_reason: null });
    } finally {
      server.setScript(readBashAnswer);
    }
  });
});
