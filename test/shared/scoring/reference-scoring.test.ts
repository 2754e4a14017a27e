/**
 * The reference's grading rules end to end, for both benchmarks: `vcfleet run` as its own process,
 * the real OpenCode in real sandboxes, a scripted policy that answers each puzzle as one case asks,
 * and a scripted judge that replies as each case asks. Each case is a puzzle whose question names it
 * (`[case:NAME]`): the rows, the metrics and what the judge was sent must be the reference's.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RowSchema, type Row } from '../../../src/shared/records/rows.ts';
import { metricsPathFor } from '../../../src/shared/output/metrics.ts';
import { NO_EXTRACTED_ANSWER, QUESTION_MAX_CHARS, RESPONSE_TAIL_CHARS } from '../../../src/workers/judge/prompt.ts';
import { writeFixtureParquet, type FixtureRow } from '../../helpers/fixture-parquet.ts';
import { startScriptedPolicyServer, toolResults, userText, type ScriptedPolicyServer } from '../../helpers/scripted-policy-server.ts';
import { type RecordedJudgeRequest, type ScriptedJudgeReply, useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { REDIS_URL, runCli } from '../../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { deletePrefix } from '../../helpers/redis-keys.ts';
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import type { ScriptReply } from '../../../src/demo/scripted-policy-types.ts';

const LONG_TEXT = 'I keep measuring. '.repeat(300); // 5,400 characters before the answer

interface Case {
  /** The gold: a letter (a choice puzzle, A-D) or a value (a blank one). */
  gold: string;
  /** What the policy answers (a function of the conversation for a tool call first). */
  reply: (calls: number) => ScriptReply;
  /** What the judge replies (default: its plausible grading). */
  judge?: ScriptedJudgeReply;
  /** A question longer than the judge is shown. */
  longQuestion?: boolean;
}

const text = (t: string, finishReason?: 'stop' | 'length') => () => ({ kind: 'text', text: t, ...(finishReason ? { finishReason } : {}) }) as ScriptReply;

const CASES: Record<string, Case> = {
  'answer-line': { gold: 'B', reply: text('Looking at the picture, the second option fits.\nAnswer: B') },
  'final-after-box': { gold: '7', reply: text('I first thought \\boxed{5}.\nAfter measuring again, Final answer: 7.') },
  'stated-unextracted': { gold: '12', reply: text('There are twelve squares in the grid.') },
  empty: { gold: 'C', reply: text('') },
  'prose-upper': { gold: 'B', reply: text('Answer: C'), judge: { content: 'Sure. {"verdict": "DIFFERENT", "reason": "C is not B"}' } },
  unsure: { gold: '4', reply: text('Answer: four-ish'), judge: { verdict: 'unsure', reason: 'cannot compare' } },
  maybe: { gold: 'A', reply: text('Answer: A'), judge: { verdict: 'maybe' } },
  'cut-reply': { gold: 'D', reply: text('Answer: D'), judge: { content: '{"verdict": "equivalent", "reas', finishReason: 'length' } },
  long: { gold: 'A', longQuestion: true, reply: text(`${LONG_TEXT}\nAnswer: A`) },
  'text-beside-tool': {
    gold: 'B',
    reply: (calls) => calls === 0
      ? { kind: 'tool_calls', text: 'First I measure the picture with Python.', calls: [{ name: 'bash', arguments: { command: 'echo measured', description: 'Measure' } }] }
      : { kind: 'text', text: 'Answer: B' },
  },
  'output-cap': { gold: 'A', reply: text('Let me think about this step by step. First, the', 'length') },
};
const NAMES = Object.keys(CASES);
const caseOf = (question: string | null): string => /\[case:([a-z-]+)\]/.exec(question ?? '')?.[1] ?? '';

/** The fixture rows, one per case: its question names it; its gold is the case's. */
function caseRows(rows: FixtureRow[]): FixtureRow[] {
  return rows.map((row, i) => {
    const name = NAMES[i];
    const c = CASES[name];
    const choice = /^[A-D]$/.test(c.gold);
    const question = `[case:${name}] Puzzle ${i + 1}: what does the picture show?${c.longQuestion ? ` ${'Look at every cell. '.repeat(130)}` : ''}`;
    return {
      ...row, question,
      ansType: choice ? 'choice' : 'blank',
      options: choice ? ['red square', 'blue circle', 'green star', 'yellow line'] : null,
      choiceAns: choice ? c.gold.charCodeAt(0) - 65 : null,
      blankAns: choice ? null : c.gold,
    };
  });
}

describe.each(['babyvision_opencode', 'babyvision_opencode_question_only'])('the reference\'s scoring rules with the real OpenCode: %s', (benchmark) => {
  let policy: ScriptedPolicyServer;
  const judge = useScriptedJudge({ script: (req) => CASES[caseOf(req.fields.question)]?.judge });
  let rows: Map<string, Row>;
  let metrics: Record<string, unknown>;
  let judged: Map<string, RecordedJudgeRequest[]>;
  const prefix = `vcftest-refscore-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    const dir = createTmpDir('vcfleet-refscore-');
    const fixture = writeFixtureParquet(path.join(dir, 'bv.parquet'), { rows: NAMES.length, mutate: caseRows });
    policy = await startScriptedPolicyServer({
      script: (body) => CASES[caseOf(userText(body))]?.reply(toolResults(body)) ?? { kind: 'text', text: 'no case' },
    });
    const output = path.join(dir, 'out', 'rows.jsonl');
    const result = await runCli([
      'run', '--benchmark', benchmark,
      `++babyvision_parquet=${fixture.path}`, `++data_dir=${path.join(dir, 'data')}`, `++state_dir=${path.join(dir, 'state')}`,
      `++output_jsonl_fpath=${output}`, `++policy_base_url=${policy.url}`, '++policy_model_name=scripted-vlm',
      `++visual_coding_opencode_judge_base_url=${judge.url}`, `++redis_url=${REDIS_URL}`, `++queues.prefix=${prefix}`,
      '++preflight.require_redis_persistence=false', '++task_timeout_s=240', '++queues.rollout_concurrency=3',
    ], { POLICY_API_KEY: 'sk-policy-ref', OPENAI_API_KEY: 'sk-judge-ref' });
    // Masked rows (the judge failures asked for) make exit code 3.
    expect(result.code, result.output).toBe(3);
    const parsed = readFileSync(output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    rows = new Map(parsed.map((r) => [caseOf(fixture.expected.find((t) => t.task_id === r.task_id)!.question), r]));
    metrics = JSON.parse(readFileSync(metricsPathFor(output), 'utf8'));
    judged = new Map(NAMES.map((n) => [n, judge.requests.filter((r) => caseOf(r.fields.question) === n)]));
  }, 600_000);

  afterAll(async () => {
    await policy?.close();
    const redis = new Redis(REDIS_URL);
    await deletePrefix(redis, prefix);
    redis.disconnect();
    removeTmpDirs();
  });

  it('an Answer: line without a box is extracted and judged: reward 1', () => {
    expect(rows.get('answer-line')).toMatchObject({ stop_reason: 'answered', extracted_answer: 'B', reward: 1, judge_verdict: 'equivalent', string_match_reward: 1, failure_reason: null });
  });

  it('a Final answer: line after an earlier box is the answer', () => {
    expect(rows.get('final-after-box')).toMatchObject({ extracted_answer: '7', reward: 1, string_match_reward: 1 });
    expect(judged.get('final-after-box')![0].fields.extracted).toBe('7');
  });

  it('a stated answer with nothing to extract is judged (told nothing was extracted) and can score 1', () => {
    const row = rows.get('stated-unextracted')!;
    expect(row).toMatchObject({ stop_reason: 'no_answer', extracted_answer: null, reward: 1, string_match_reward: 0, failure_reason: null });
    const [req] = judged.get('stated-unextracted')!;
    expect(req.fields.noExtractedMarker).toBe(true);
    expect(req.user).toContain(NO_EXTRACTED_ANSWER);
    expect(req.fields.responseEnd).toBe('There are twelve squares in the grid.');
  });

  it('an empty response scores 0 without a judge call, and is not masked', () => {
    expect(rows.get('empty')).toMatchObject({ reward: 0, failure_kind: null, judge_verdict: null, judge_model: null, failure_reason: 'no_response', string_match_reward: 0 });
    expect(judged.get('empty')).toHaveLength(0);
  });

  it('a judge reply in prose and upper case is read: different, a scored 0', () => {
    expect(rows.get('prose-upper')).toMatchObject({ reward: 0, judge_verdict: 'different', failure_kind: null, failure_reason: 'incorrect_answer', string_match_reward: 0 });
  });

  it('unsure is a verdict: 0, scored', () => {
    expect(rows.get('unsure')).toMatchObject({ reward: 0, judge_verdict: 'unsure', failure_kind: null, failure_reason: 'incorrect_answer' });
  });

  it('maybe and a reply cut at max_tokens are no verdict: masked judge_failed, asked twice', () => {
    for (const name of ['maybe', 'cut-reply']) {
      expect(rows.get(name), name).toMatchObject({ reward: null, failure_kind: 'judge_failed', judge_failure: 'no_verdict', failure_reason: 'judge_error' });
      expect(judged.get(name), name).toHaveLength(2);
    }
    expect(rows.get('cut-reply')!.error).toMatch(/cut at its max_tokens/);
  });

  it('the judge sees the question cut at 2,000 and the text at 4,000 characters, and is told so', () => {
    const [req] = judged.get('long')!;
    expect(rows.get('long')).toMatchObject({ extracted_answer: 'A', reward: 1 });
    expect([...req.fields.question!]).toHaveLength(QUESTION_MAX_CHARS);
    expect([...req.fields.responseEnd!]).toHaveLength(RESPONSE_TAIL_CHARS);
    expect(req.fields.responseEnd!.endsWith('\nAnswer: A')).toBe(true);
    expect(req.user).toContain(`only its first ${QUESTION_MAX_CHARS} characters`);
    expect(req.user).toContain(`only its last ${RESPONSE_TAIL_CHARS} characters`);
    // The reference's request: temperature 0, top_p 1, max 1024 output tokens.
    expect(req.body).toMatchObject({ temperature: 0, top_p: 1, max_tokens: 1024 });
  });

  it('the first turn\'s text beside a tool call is part of what the judge sees', () => {
    expect(rows.get('text-beside-tool')).toMatchObject({ tool_calls: 1, turns: 2, extracted_answer: 'B', reward: 1 });
    expect(judged.get('text-beside-tool')![0].fields.responseEnd).toBe('First I measure the picture with Python.\nAnswer: B');
  });

  it('a run that did not complete scores 0 without a judge call, whatever text it had', () => {
    expect(rows.get('output-cap')).toMatchObject({ stop_reason: 'output_cap', reward: 0, failure_kind: null, failure_reason: 'no_response' });
    expect(judged.get('output-cap')).toHaveLength(0);
  });

  it('the metrics carry the string-match mean and the disagreements with the judge', () => {
    // Scored: answer-line 1/1, final-after-box 1/1, stated 1/0, empty 0/0, prose 0/0, unsure 0/0, long 1/1, tool 1/1, cap 0/0.
    expect(metrics.num_scored).toBe(9);
    expect(metrics['mean/reward']).toBeCloseTo(5 / 9, 5);
    expect(metrics['mean/string_match_reward']).toBeCloseTo(4 / 9, 5);
    expect(metrics.judge_string_match_disagreements).toBe(1);
    expect(metrics.judge_string_match_disagreements_by).toEqual({ judge_only: 1, string_match_only: 0 });
  });
});
