/**
 * The judge's token usage reaches the grading (and from there the row's `judge_input_tokens`,
 * `judge_output_tokens`): read from each reply's `usage`, summed over the replies a grading used (a
 * reply without a verdict is asked again, and both count), 0 for a cached verdict and for replies that
 * say nothing of their usage. Real openai client, real HTTP, the scripted judge server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import type { JudgeInput } from '../../../src/shared/ports/judge.ts';
import { createMemoryJudgeCache } from '../../../src/workers/judge/judge-cache.ts';
import { createJudge } from '../../../src/workers/judge/openai-judge.ts';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../../helpers/scripted-judge-server.ts';

const input: JudgeInput = { question: 'Which tile is odd?', expectedAnswer: 'B', extractedAnswer: 'B', responseText: 'It is \\boxed{B}' };

let server: ScriptedJudgeServer;
beforeAll(async () => {
  server = await startScriptedJudgeServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.setScript([]);
  server.requests.length = 0;
});

function judgeWith(cache: boolean) {
  const config = ConfigSchema.parse({
    visual_coding_opencode_judge_base_url: server.url,
    judge: { api_key: 'sk-test', timeout_s: 5, max_retries: 2, backoff_base_ms: 10, backoff_max_ms: 50, cache },
  });
  return createJudge({ config, logger: pino({ level: 'silent' }), cache: cache ? createMemoryJudgeCache() : undefined });
}

/** A 200 reply with the verdict and the usage given (or none). */
function reply(usage: unknown): { status: number; body: unknown } {
  return {
    status: 200,
    body: {
      id: 'x', object: 'chat.completion', created: 0, model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: '{"verdict": "equivalent", "reason": "same"}' }, finish_reason: 'stop' }],
      ...(usage === undefined ? {} : { usage }),
    },
  };
}

describe("the judge's token usage", () => {
  it('is read from the reply, and is 0 for the same grading served from the cache', async () => {
    const judge = judgeWith(true);
    server.setScript([reply({ prompt_tokens: 812, completion_tokens: 37, total_tokens: 849 })]);
    const first = await judge.grade(input);
    expect(first).toMatchObject({ status: 'scored', cached: false, usage: { input_tokens: 812, output_tokens: 37 } });
    const again = await judge.grade(input);
    expect(again).toMatchObject({ status: 'scored', cached: true, usage: { input_tokens: 0, output_tokens: 0 } });
    expect(server.requests).toHaveLength(1);
  });

  it('sums both replies when the first held no verdict and the judge was asked again', async () => {
    const judge = judgeWith(false);
    server.setScript([{ content: 'I think they match.' }, 'grade']);
    const out = await judge.grade(input);
    expect(out.status).toBe('scored');
    expect(server.requests).toHaveLength(2);
    expect(out.usage).toEqual({ input_tokens: 200, output_tokens: 40 }); // the scripted server counts 100 / 20 a reply
  });

  it('counts 0 for a reply that gives no usage, or a usage that is not a count', async () => {
    const judge = judgeWith(false);
    server.setScript([reply(undefined)]);
    expect((await judge.grade(input)).usage).toEqual({ input_tokens: 0, output_tokens: 0 });
    server.setScript([reply({ prompt_tokens: -5, completion_tokens: 'many' })]);
    expect((await judge.grade(input)).usage).toEqual({ input_tokens: 0, output_tokens: 0 });
  });
});
