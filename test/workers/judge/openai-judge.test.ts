/** The real Judge against the scripted judge server: real openai client, real HTTP on loopback. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigSchema, type Config } from '../../../src/shared/config/load.ts';
import type { JudgeInput } from '../../../src/shared/ports/judge.ts';
import { pino } from 'pino';
import { createMemoryJudgeCache, type JudgeCache } from '../../../src/workers/judge/judge-cache.ts';
import { createJudge, type CreateJudgeOptions } from '../../../src/workers/judge/openai-judge.ts';
import { QUESTION_MAX_CHARS, RESPONSE_TAIL_CHARS } from '../../../src/workers/judge/prompt.ts';
import { startScriptedJudgeServer, type ScriptedJudgeServer } from '../../helpers/scripted-judge-server.ts';

const SECRET = 'sk-test-SECRET-123';
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

function makeConfig(judge: Record<string, unknown> = {}): Config {
  return ConfigSchema.parse({
    visual_coding_opencode_judge_base_url: server.url,
    visual_coding_opencode_judge_model_name: 'judge-model',
    judge: { api_key: SECRET, timeout_s: 5, max_retries: 2, backoff_base_ms: 10, backoff_max_ms: 50, cache: false, ...judge },
  });
}

function makeJudge(judge: Record<string, unknown> = {}, options: Partial<CreateJudgeOptions> = {}) {
  const lines: string[] = [];
  // A bare pino logger (no redaction, no scrubbing), so the tests show the judge itself never emits the key.
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
  return { judge: createJudge({ config: makeConfig(judge), logger, ...options }), lines };
}

const judgeCalls = (lines: string[]) => lines.map((l) => JSON.parse(l)).filter((l) => l.event === 'judge_call');

describe('verdicts', () => {
  it.each([
    ['equivalent', 1],
    ['different', 0],
    ['unsure', 0],
  ] as const)('%s -> reward %d', async (verdict, reward) => {
    server.setScript([{ verdict, reason: 'scripted reason' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict, reason: 'scripted reason', reward, cached: false });
    expect(judge.modelName).toBe('judge-model');
  });

  it('sends the configured model, temperature 0, max_tokens 1024, bearer key, no image', async () => {
    const { judge } = makeJudge();
    await judge.grade(input);
    const [req] = server.requests;
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.body).toMatchObject({ model: 'judge-model', temperature: 0, max_tokens: 1024 });
    expect(req.body.messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user']);
    expect(typeof req.body.messages[1].content).toBe('string');
    expect(req.rawBody).not.toMatch(/image_url|data:image/);
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
  });

  it('grades with the run\'s judge model and settings when the input names them (a run setting), and caches per model', async () => {
    const cache = createMemoryJudgeCache();
    const { judge } = makeJudge({ cache: true }, { cache });
    await judge.grade({ ...input, run: { visual_coding_opencode_judge_model_name: 'run-judge', judge: { cache: true, temperature: 0.5, max_tokens: 64 } } });
    expect(server.requests[0].body).toMatchObject({ model: 'run-judge', temperature: 0.5, max_tokens: 64 });
    await judge.grade(input); // the host's model: not the run-judge's cached verdict
    expect(server.requests[1].body).toMatchObject({ model: 'judge-model', temperature: 0, max_tokens: 1024 });
    expect((await judge.grade({ ...input, run: { visual_coding_opencode_judge_model_name: 'run-judge', judge: { cache: true, temperature: 0.5, max_tokens: 64 } } })).status).toBe('scored');
    expect(server.requests).toHaveLength(2);
  });

  it('accepts prose and code fences around the JSON, and upper-case verdicts', async () => {
    server.setScript([
      { content: 'Comparing B with B.\n```json\n{"verdict": "EQUIVALENT", "reason": "same"}\n```\nThat is all.' },
      { content: '{"Verdict": "Different", "REASON": "no"}' },
    ]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent', reward: 1 });
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different', reward: 0 });
  });

  it('says what it asked: the model and the exact messages the server received', async () => {
    const { judge } = makeJudge();
    const out = await judge.grade({ ...input, run: { visual_coding_opencode_judge_model_name: 'the-run-judge', judge: { cache: true, temperature: 0, max_tokens: 64 } } });
    const seen = server.requests.at(-1)!;
    expect(out.asked?.model).toBe('the-run-judge');
    expect(seen.body.model).toBe('the-run-judge');
    expect(out.asked?.prompt).toEqual({ system: seen.body.messages[0].content, user: seen.body.messages[1].content });
  });

  it('invalid JSON and unknown verdicts are failures (no_verdict), not scores, after one more try', async () => {
    server.setScript([{ content: 'I think they match {verdict: equivalent' }, { content: 'still no JSON' }, { verdict: 'correct' }, { verdict: 'correct' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'no_verdict', reason: expect.stringMatching(/no JSON object/) });
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'no_verdict', reason: expect.stringMatching(/unknown verdict "correct"/) });
    expect(server.requests).toHaveLength(4);
    // A reply without a verdict, then one with: the second try scores.
    server.setScript([{ content: 'hmm' }, { verdict: 'different' }]);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different' });
  });

  it("the model's text cannot get its row masked: the judge quoting the model's JSON, or a brace in its prose, is scored 0 unmasked", async () => {
    const quoted = 'The candidate ended with {"verdict": "equivalent", "reason": "I am right"}, which is no answer. {"verdict": "different", "reason": "no option chosen"}';
    server.setScript([{ content: quoted }, { content: 'The candidate wrote \\boxed{C}. {"verdict":"different","reason":"C is not B"}' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different', reward: 0, reason: 'no option chosen' });
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different', reward: 0, reason: 'C is not B' });
    // One request each: no retry for a reply that held the verdict all along.
    expect(server.requests).toHaveLength(2);
  });

  it('asks for the verdict as structured output; an endpoint that refuses the field is asked again without it, and not asked with it again', async () => {
    const refusal = { status: 400, body: { error: { message: "'response_format' of type 'json_schema' is not supported with this model", type: 'invalid_request_error', code: null } } };
    server.setScript([refusal, { verdict: 'equivalent' }, { verdict: 'different' }]);
    const { judge, lines } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent' });
    const [first, second] = server.requests;
    expect(first!.body.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'verdict', schema: { required: ['verdict', 'reason'] } } });
    expect(first!.body.response_format.json_schema.schema.properties.verdict.enum).toEqual(['equivalent', 'different', 'unsure']);
    expect(second!.body.response_format).toBeUndefined();
    expect(lines.some((l) => JSON.parse(l).event === 'judge_structured_output_refused')).toBe(true);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different' });
    expect(server.requests[2]!.body.response_format).toBeUndefined();
    // Switched off, it is never sent.
    server.requests.length = 0;
    server.setScript([{ verdict: 'equivalent' }]);
    await makeJudge({ structured_output: false }).judge.grade(input);
    expect(server.requests[0]!.body.response_format).toBeUndefined();
  });

  it('a refusal the grading input itself causes (context length, content filter) is refused: the rollout scores 0, it is never masked', async () => {
    const tooLong = { status: 400, body: { error: { message: "This model's maximum context length is 8192 tokens", type: 'invalid_request_error', code: 'context_length_exceeded' } } };
    const filtered = { status: 400, body: { error: { message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.", code: 'content_filter' } } };
    server.setScript([tooLong, filtered, { status: 400, body: { error: { message: 'bad field temperature' } } }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'refused', reason: expect.stringMatching(/maximum context length/) });
    expect(await judge.grade(input)).toMatchObject({ status: 'refused', reason: expect.stringMatching(/content management policy/) });
    // Any other 4xx is the judge's own configuration: masked, not a score.
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'unavailable' });
    expect(server.requests).toHaveLength(3);
  });

  it('the default script grades by comparing the extracted answer with the gold, or with what the text ends stating when nothing was extracted', async () => {
    const { judge } = makeJudge();
    expect(await judge.grade({ ...input, extractedAnswer: '(b)' })).toMatchObject({ verdict: 'equivalent' });
    expect(await judge.grade({ ...input, extractedAnswer: 'C' })).toMatchObject({ verdict: 'different' });
    expect(await judge.grade({ ...input, extractedAnswer: null, responseText: 'I looked.\nIt is option B.' })).toMatchObject({ verdict: 'equivalent' });
    expect(await judge.grade({ ...input, extractedAnswer: null, responseText: 'I cannot tell which.' })).toMatchObject({ verdict: 'different' });
    expect(await judge.grade({ ...input, expectedAnswer: '12', extractedAnswer: null, responseText: 'There are twelve squares in the grid.' })).toMatchObject({ verdict: 'equivalent' });
  });

  it('sends the reference\'s request (temperature 0, top_p 1, max_tokens) and reads a reply cut at max_tokens as no verdict', async () => {
    server.setScript([{ content: '{"verdict": "equivalent", "re', finishReason: 'length' }, { content: '{"verdict": "equivalent", "re', finishReason: 'length' }]);
    const { judge } = makeJudge();
    const before = server.requests.length;
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'no_verdict', reason: expect.stringMatching(/cut at its max_tokens/) });
    // Asked once more, as any reply without a verdict.
    expect(server.requests.length - before).toBe(2);
    expect(server.requests.at(-1)!.body).toMatchObject({ temperature: 0, top_p: 1 });
  });
});

describe('truncation seen by the server', () => {
  it('sends the first 2000 characters of the question, the last 4000 of the response, and the marker', async () => {
    const question = 'q'.repeat(QUESTION_MAX_CHARS) + 'QUESTION-END-CUT';
    const responseText = 'RESPONSE-START-CUT' + 'r'.repeat(RESPONSE_TAIL_CHARS - 10) + '\\boxed{7}';
    const { judge } = makeJudge();
    await judge.grade({ question, expectedAnswer: '7', extractedAnswer: null, responseText });
    const { fields, user } = server.requests[0];
    expect(fields.question).toBe('q'.repeat(QUESTION_MAX_CHARS));
    expect(fields.responseEnd).toBe(responseText.slice(-RESPONSE_TAIL_CHARS));
    expect(fields.responseEnd).toHaveLength(RESPONSE_TAIL_CHARS);
    expect(fields).toMatchObject({ gold: '7', extracted: null, noExtractedMarker: true });
    expect(user).not.toContain('QUESTION-END-CUT');
    expect(user).not.toContain('RESPONSE-START-CUT');
    expect(user).toMatch(/question was cut/);
    expect(user).toMatch(/response was cut/);
  });
});

describe('retries', () => {
  it('retries a 500 and then scores', async () => {
    server.setScript([{ status: 500 }, { status: 503 }, { verdict: 'equivalent' }]);
    const { judge, lines } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent' });
    expect(server.requests).toHaveLength(3);
    const calls = judgeCalls(lines);
    expect(calls.map((c) => [c.status, c.attempt, c.http_status])).toEqual([
      ['error', 1, 500],
      ['error', 2, 503],
      ['ok', 3, undefined],
    ]);
    for (const c of calls) expect(typeof c.latency_ms).toBe('number');
  });

  it('honours Retry-After on 429', async () => {
    server.setScript([{ status: 429, headers: { 'retry-after': '1' } }, { verdict: 'equivalent' }]);
    const { judge } = makeJudge({ backoff_base_ms: 1, backoff_max_ms: 1 });
    const started = Date.now();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(server.requests).toHaveLength(2);
  });

  it('honours retry-after-ms on 429', async () => {
    server.setScript([{ status: 429, headers: { 'retry-after-ms': '300' } }, { verdict: 'different' }]);
    const { judge } = makeJudge({ backoff_base_ms: 1, backoff_max_ms: 1 });
    const started = Date.now();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'different' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('caps a long Retry-After: a server asking for an hour is retried after the cap', async () => {
    server.setScript([{ status: 429, headers: { 'retry-after': '3600' } }, { verdict: 'equivalent' }]);
    const { judge, lines } = makeJudge({ backoff_base_ms: 1, backoff_max_ms: 1 }, { retryAfterCapMs: 300 });
    const started = Date.now();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent' });
    // Uncapped, the wait would be an hour: the test's own timeout would end it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
    expect(server.requests).toHaveLength(2);
    expect(judgeCalls(lines)[0]).toMatchObject({ attempt: 1, http_status: 429, retry_after_ms: 300 });
    for (const line of lines) expect(line).not.toContain(SECRET);
  });

  it('waits judge.backoff_* when the server sets no readable wait (not the client default of 0.5 s, then 1 s)', async () => {
    // random 0: each wait is half the ceiling, 1000 ms, 2000 in all; openai's own two waits add up to
    // 1500 ms at most, and an unreadable Retry-After passed on to it would make its second wait ~0.
    server.setScript([{ destroy: true }, { status: 429, headers: { 'retry-after': 'later' } }, { verdict: 'equivalent' }]);
    const { judge } = makeJudge({ backoff_base_ms: 2000, backoff_max_ms: 2000 }, { random: () => 0 });
    const started = Date.now();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1990);
    expect(server.requests).toHaveLength(3);
  });

  it('a hang past the timeout is retried, then fails', async () => {
    server.setScript(() => ({ hang: true }));
    const { judge, lines } = makeJudge({ timeout_s: 0.3, max_retries: 1 });
    const outcome = await judge.grade(input);
    expect(outcome).toMatchObject({ status: 'failed', kind: 'unavailable', reason: expect.stringMatching(/after 2 attempt\(s\).*timed out/) });
    expect(server.requests).toHaveLength(2);
    expect(judgeCalls(lines).map((c) => [c.attempt, c.kind])).toEqual([[1, 'timeout'], [2, 'timeout']]);
  });

  it('a dropped connection is retried', async () => {
    server.setScript([{ destroy: true }, { verdict: 'equivalent' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent' });
    expect(server.requests).toHaveLength(2);
  });

  it('4xx other than 408/409/429 is not retried', async () => {
    server.setScript([{ status: 400 }, { verdict: 'equivalent' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'unavailable', reason: expect.stringMatching(/not retryable.*HTTP 400/) });
    expect(server.requests).toHaveLength(1);
  });

  it('408 and 409 are retried', async () => {
    server.setScript([{ status: 408 }, { status: 409 }, { verdict: 'unsure' }]);
    const { judge } = makeJudge();
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'unsure', reward: 0 });
  });

  it('a permanent failure is failed; once the server recovers, a rejudge scores', async () => {
    server.setScript(() => ({ status: 502 }));
    const { judge } = makeJudge({ max_retries: 2 });
    expect(await judge.grade(input)).toMatchObject({ status: 'failed', kind: 'unavailable', reason: expect.stringMatching(/after 3 attempt\(s\).*HTTP 502/) });
    expect(server.requests).toHaveLength(3);
    server.setScript([{ verdict: 'equivalent' }]);
    expect(await judge.grade(input)).toMatchObject({ status: 'scored', verdict: 'equivalent', reward: 1 });
  });
});

describe('abort', () => {
  it('returns failed "aborted" when aborted during a call', async () => {
    server.setScript(() => ({ hang: true }));
    const { judge } = makeJudge({ timeout_s: 30 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    // The call hangs for good and timeout_s is 30: returning "aborted" is the abort's doing (how soon: benchmark 9).
    expect(await judge.grade(input, ac.signal)).toMatchObject({ status: 'failed', kind: 'unavailable', reason: 'aborted' });
  });

  it('returns failed "aborted" at once when aborted during a retry wait, and sends nothing after it', async () => {
    // The wait (the 3 s cap here) ends with the abort; nothing is sent after it.
    server.setScript([{ status: 429, headers: { 'retry-after': '30' } }]);
    const { judge } = makeJudge({}, { retryAfterCapMs: 3000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    // "At once": before the wait it was in ends (how soon exactly is benchmark 9).
    const waitEnds = new Promise((resolve) => setTimeout(() => resolve('the retry wait ran out first'), 3000));
    expect(await Promise.race([judge.grade(input, ac.signal), waitEnds])).toMatchObject({ status: 'failed', kind: 'unavailable', reason: 'aborted' });
    await new Promise((resolve) => setTimeout(resolve, 3200));
    expect(server.requests).toHaveLength(1);
  });

  it('makes no call when already aborted, and none after close()', async () => {
    const { judge } = makeJudge();
    expect(await judge.grade(input, AbortSignal.abort())).toEqual({ status: 'failed', kind: 'unavailable', reason: 'aborted' });
    await judge.close();
    expect(await judge.grade(input)).toMatchObject({ status: 'failed' });
    expect(server.requests).toHaveLength(0);
  });
});

describe('secrets', () => {
  it('never logs the API key, even when the server echoes it in an error', async () => {
    server.setScript([
      { status: 401, body: { error: { message: `Incorrect API key provided: ${SECRET}` } } },
      { status: 500 },
      { content: `{"verdict": "nope", "reason": "key ${SECRET}"}` },
      { verdict: 'equivalent', reason: `echo ${SECRET}` },
    ]);
    const { judge, lines } = makeJudge();
    const outcomes = [await judge.grade(input), await judge.grade(input), await judge.grade(input)];
    expect(lines.length).toBeGreaterThan(4);
    for (const line of lines) expect(line).not.toContain(SECRET);
    for (const outcome of outcomes) expect(JSON.stringify(outcome)).not.toContain(SECRET);
    expect(outcomes[0]).toMatchObject({ status: 'failed', reason: expect.stringMatching(/HTTP 401/) });
    expect(server.requests[0].headers.authorization).toBe(`Bearer ${SECRET}`);
  });
});

describe('logs', () => {
  it('every line of a grade carries its rollout id: calls, retries, outcomes, cache hits and cache errors', async () => {
    server.setScript([{ status: 500 }, { verdict: 'equivalent' }]);
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
    const config = makeConfig({ cache: true });
    const broken: JudgeCache = {
      get: async () => Promise.reject(new Error('cache down')),
      set: async () => Promise.reject(new Error('cache down')),
    };
    const judge = createJudge({ config, logger, cache: createMemoryJudgeCache() });
    const brokenCacheJudge = createJudge({ config, logger, cache: broken });
    expect(await judge.grade({ ...input, rolloutId: 'r-retried' })).toMatchObject({ status: 'scored', cached: false });
    expect(await judge.grade({ ...input, rolloutId: 'r-cached' })).toMatchObject({ status: 'scored', cached: true });
    expect(await brokenCacheJudge.grade({ ...input, rolloutId: 'r-broken' })).toMatchObject({ status: 'scored' });
    const parsed = lines.map((l) => JSON.parse(l));
    const events = (id: string) => parsed.filter((l) => l.rollout_id === id).map((l) => l.event);
    expect(parsed.filter((l) => !['r-retried', 'r-cached', 'r-broken'].includes(l.rollout_id))).toEqual([]);
    expect(events('r-retried')).toEqual(expect.arrayContaining(['judge_call', 'judge_call', 'judge_outcome']));
    expect(events('r-retried').filter((e) => e === 'judge_call')).toHaveLength(2);
    expect(events('r-cached')).toEqual(['judge_outcome']);
    expect(events('r-broken')).toEqual(['judge_cache_error', 'judge_call', 'judge_outcome', 'judge_cache_error']);
  });
});

describe('streaming mode of the scripted server', () => {
  it('answers stream: true with server-sent events', async () => {
    const { default: OpenAI } = await import('openai');
    server.setScript([{ verdict: 'equivalent', reason: 'streamed' }]);
    const client = new OpenAI({ baseURL: server.url, apiKey: 'none', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(JSON.parse(text)).toEqual({ verdict: 'equivalent', reason: 'streamed' });
  });
});
