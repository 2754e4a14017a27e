/**
 * A run's output folder for viewer tests, written the way the results consumer lays it out:
 * `<stem>.jsonl` (rows), `<stem>_transcripts/<rollout>.json` (transcript records) and
 * `<stem>_transcripts/images/<sha256>.png` (every image once). Each rollout is described by a
 * `FixtureRollout`; its row, its transcript and its images follow from that, deterministically.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RowSchema, type Row } from '../../src/shared/records/rows.ts';
import { imageFileName, safeFileStem, TranscriptRecordSchema, transcriptDirFor, transcriptRelPath, type TranscriptRecord, type TranscriptTurn } from '../../src/shared/records/transcript.ts';
import { encodePng } from './fixture-images.ts';

export type FixtureOutcome = 'correct' | 'wrong' | 'no_answer' | 'timeout' | 'output_cap' | 'context_limit' | 'agent_error' | 'judge_failed' | 'infra_failed';

/** What the model did: answer at once, crop with bash and `read` the crop, write hostile HTML, or print a long output. */
export type FixtureScript = 'plain' | 'crop' | 'hostile' | 'long_output';

export interface FixtureRollout {
  task_id: string;
  repeat?: number;
  type: string;
  subtype: string;
  /** Gold answer (a letter for choice tasks). */
  expected?: string;
  outcome: FixtureOutcome;
  script?: FixtureScript;
  /** `kept` (default): written; `missing`: the row names it but the file is not there; `none`: `transcript: null`. */
  transcript?: 'kept' | 'missing' | 'none';
  /** Wall time in seconds (default from the task and repeat). */
  wall_s?: number;
  /** Extra tool-free turns before the answer, to vary the turn count. */
  extra_turns?: number;
}

export interface FixtureRun {
  runId: string;
  rollouts: FixtureRollout[];
}

export interface ViewerFixture {
  jsonl: string;
  transcriptsDir: string;
  imagesDir: string;
  /** Rows as written, by run, in file order. */
  rows: Row[];
  /** SHA-256 of each task's puzzle image, by task id; and of the crop the `crop` script reads. */
  puzzles: Record<string, string>;
  cropSha: string;
}

/** Text the `hostile` script writes everywhere it can: it must show literally and never run. */
export const HOSTILE_TEXT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> \\boxed{<b>B</b>}';
export const HOSTILE_ANSWER = '<img src=x onerror="window.__pwned = 3">';

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A puzzle-like picture: a grid of coloured cells that depends on `seed`. */
export function puzzlePng(seed: number, width = 180, height = 120): Uint8Array {
  return encodePng(width, height, (x, y) => {
    const cell = (Math.floor(x / 30) * 7 + Math.floor(y / 30) * 13 + seed) % 5;
    if (x % 30 === 0 || y % 30 === 0) return [40, 40, 40];
    return ([[235, 87, 87], [86, 156, 214], [240, 200, 80], [120, 190, 120], [250, 250, 250]] as const)[cell];
  });
}

function turn(index: number, text: string, extra: Partial<TranscriptTurn> = {}): TranscriptTurn {
  return {
    index, started_at: new Date(Date.UTC(2025, 0, 1, 12, 0, index)).toISOString(), latency_ms: 800 + 137 * index, status: 200, error: null,
    finish_reason: 'stop', input_tokens: 1500 + 400 * index, output_tokens: 120 + 15 * index, shown_images: [], text, reasoning: null, tool_calls: [], ...extra,
  };
}

function scriptTurns(r: FixtureRollout, puzzleSha: string, cropSha: string, answerText: string): TranscriptTurn[] {
  const script = r.script ?? 'plain';
  const turns: TranscriptTurn[] = [turn(0, script === 'hostile' ? HOSTILE_TEXT : 'Let me look at the image closely.', { shown_images: [puzzleSha] })];
  if (script === 'crop') {
    turns[0].finish_reason = 'tool_calls';
    turns[0].tool_calls = [{ id: 'call_bash_1', name: 'bash', arguments: JSON.stringify({ command: "python3 -c \"from PIL import Image; Image.open('puzzle.png').crop((0,0,60,60)).save('crop.png')\"" }), output: 'saved crop.png (60x60)\n', images: [] }];
    turns.push(turn(1, 'Now I read the crop.', { finish_reason: 'tool_calls', tool_calls: [{ id: 'call_read_1', name: 'read', arguments: JSON.stringify({ filePath: '/workspace/crop.png' }), output: 'Image read successfully', images: [cropSha] }] }));
  } else if (script === 'hostile') {
    turns[0].tool_calls = [{ id: 'call_bash_x', name: 'bash', arguments: JSON.stringify({ command: `echo '${HOSTILE_TEXT}'` }), output: `${HOSTILE_TEXT}\n`, images: [] }];
  } else if (script === 'long_output') {
    const lines = Array.from({ length: 200 }, (_, i) => `pixel row ${i}: ${'0 1 '.repeat(12)}`).join('\n');
    turns[0].tool_calls = [{ id: 'call_bash_long', name: 'bash', arguments: JSON.stringify({ command: 'python3 dump.py' }), output: lines, images: [] }];
  }
  for (let i = 0; i < (r.extra_turns ?? 0); i++) turns.push(turn(turns.length, `Checking again (${i + 1}).`));
  turns.push(turn(turns.length, answerText));
  return turns;
}

interface Built {
  row: Row;
  record: TranscriptRecord | null;
}

/** What the model answered: the gold for `correct` and `judge_failed`, another letter for `wrong`, nothing otherwise. */
function answerOf(r: FixtureRollout, expected: string): string | null {
  if (r.script === 'hostile') return HOSTILE_ANSWER;
  if (r.outcome === 'wrong') return expected === 'A' ? 'C' : 'A';
  return r.outcome === 'correct' || r.outcome === 'judge_failed' ? expected : null;
}

const ERRORS: Partial<Record<FixtureOutcome, string>> = {
  agent_error: 'opencode exited with code 1',
  judge_failed: 'judge call failed after 5 attempts: HTTP 503',
  infra_failed: 'sandbox provider unavailable after 3 attempts',
};

function buildRow(runId: string, r: FixtureRollout, jsonl: string, turns: readonly TranscriptTurn[]): Row {
  const repeat = r.repeat ?? 0;
  const rolloutId = `${runId}-${r.task_id}-${repeat}`;
  const expected = r.expected ?? 'B';
  const answer = answerOf(r, expected);
  const scored = r.outcome === 'correct' || r.outcome === 'wrong';
  const failure = r.outcome === 'judge_failed' || r.outcome === 'infra_failed' ? r.outcome : null;
  const reason = r.script === 'hostile' ? `judge saw ${HOSTILE_TEXT}` : r.outcome === 'correct' ? 'The response matches the expected answer.' : 'The response names a different option.';
  const sum = (pick: (t: TranscriptTurn) => number) => turns.reduce((n, t) => n + pick(t), 0);
  return RowSchema.parse({
    run_id: runId, rollout_id: rolloutId, task_id: r.task_id, repeat, benchmark: 'babyvision_opencode', type: r.type, subtype: r.subtype,
    ans_type: 'choice', expected_answer: expected, extracted_answer: answer,
    reward: scored ? (r.outcome === 'correct' ? 1 : 0) : failure ? null : 0,
    judge_verdict: scored ? (r.outcome === 'correct' ? 'equivalent' : 'different') : null, judge_reason: scored ? reason : null,
    stop_reason: r.outcome === 'infra_failed' ? null : scored || failure ? 'answered' : r.outcome, failure_kind: failure,
    turns: turns.length, tool_calls: sum((t) => t.tool_calls.length), input_tokens: sum((t) => t.input_tokens ?? 0), output_tokens: sum((t) => t.output_tokens ?? 0),
    wall_s: r.wall_s ?? Math.round((4 + turns.length * 3.5 + (Number(r.task_id.replace(/\D/g, '')) % 7) + repeat * 0.3) * 1000) / 1000,
    policy_model: 'policy-vlm', judge_model: scored || failure === 'judge_failed' ? 'judge-model' : null, error: ERRORS[r.outcome] ?? null,
    finished_at: new Date(Date.UTC(2025, 0, 1, 13, 0, 0) + repeat * 1000).toISOString(),
    limit_hits: r.outcome === 'output_cap' ? { output_tokens: 1 } : {}, refused_requests: r.script === 'crop' ? { path: 1 } : {},
    transcript: (r.transcript ?? 'kept') === 'none' ? null : transcriptRelPath(jsonl, rolloutId),
  });
}

function buildRecord(row: Row, r: FixtureRollout, turns: TranscriptTurn[], puzzleSha: string, cropSha: string): TranscriptRecord {
  return TranscriptRecordSchema.parse({
    transcript_version: 1, run_id: row.run_id, rollout_id: row.rollout_id, task_id: row.task_id, repeat: row.repeat, attempt: 1, benchmark: row.benchmark, policy_model: row.policy_model,
    task: {
      prompt: 'Look at the image first. Use code when precision matters. Answer in \\boxed{}.', question: `Which option completes the pattern of task ${r.task_id}?`,
      gold: row.expected_answer, ans_type: 'choice', type: r.type, subtype: r.subtype, options: ['a red square', 'a blue square', 'a yellow square', 'a green square'], image_sha256: puzzleSha,
    },
    started_at: '2025-01-01T12:00:00.000Z', wall_s: row.wall_s, turns,
    outcome: { stop_reason: row.stop_reason, extracted_answer: row.extracted_answer, error: row.error, limit_hits: row.limit_hits, refused_requests: row.refused_requests },
    judge: row.judge_model === null ? null : {
      model: row.judge_model, verdict: row.judge_verdict, reason: row.judge_reason, cached: false,
      prompt: { system: 'You grade answers to visual puzzles.', user: `Question: ...\nExpected: ${row.expected_answer}\nResponse: ${row.extracted_answer ?? ''}` },
    },
    agent: { exit_code: r.outcome === 'agent_error' ? 1 : 0, signal: null, timed_out: r.outcome === 'timeout', stderr_tail: r.script === 'hostile' ? HOSTILE_TEXT : 'opencode: session done\n' },
    image_mimes: Object.fromEntries([puzzleSha, cropSha].map((sha) => [sha, 'image/png'])),
  });
}

function build(runId: string, r: FixtureRollout, jsonl: string, puzzleSha: string, cropSha: string): Built {
  const answer = answerOf(r, r.expected ?? 'B');
  const turns = r.outcome === 'infra_failed' ? [] : scriptTurns(r, puzzleSha, cropSha, answer === null ? 'I am not sure.' : `So the answer is \\boxed{${answer}}.`);
  const row = buildRow(runId, r, jsonl, turns);
  return { row, record: (r.transcript ?? 'kept') === 'kept' ? buildRecord(row, r, turns, puzzleSha, cropSha) : null };
}

/** Write `runs` into one JSONL `<dir>/<stem>.jsonl` with transcripts and images beside it. */
export function writeViewerFixture(dir: string, runs: FixtureRun[], opts: { stem?: string; imageSize?: [number, number] } = {}): ViewerFixture {
  const jsonl = path.join(dir, `${opts.stem ?? 'run'}.jsonl`);
  const transcriptsDir = transcriptDirFor(jsonl);
  const imagesDir = path.join(transcriptsDir, 'images');
  mkdirSync(imagesDir, { recursive: true });
  const writeImage = (bytes: Uint8Array) => {
    const sha = sha256(bytes);
    writeFileSync(path.join(imagesDir, imageFileName(sha, 'image/png')), bytes);
    return sha;
  };
  const [w, h] = opts.imageSize ?? [180, 120];
  const cropSha = writeImage(puzzlePng(99, 60, 60));
  const puzzles: Record<string, string> = {};
  const rows: Row[] = [];
  for (const run of runs) {
    for (const r of run.rollouts) {
      puzzles[r.task_id] ??= writeImage(puzzlePng(Object.keys(puzzles).length, w, h));
      const { row, record } = build(run.runId, r, jsonl, puzzles[r.task_id], cropSha);
      rows.push(row);
      if (record) writeFileSync(path.join(transcriptsDir, `${safeFileStem(row.rollout_id)}.json`), JSON.stringify(record));
    }
  }
  writeFileSync(jsonl, rows.map((row) => `${JSON.stringify(row)}\n`).join(''));
  return { jsonl, transcriptsDir, imagesDir, rows, puzzles, cropSha };
}
