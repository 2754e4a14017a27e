/**
 * A scripted judge: a real node:http server speaking the OpenAI chat-completions protocol
 * (`POST /v1/chat/completions`, plain JSON or `stream: true` server-sent events), so tests exercise
 * the real openai client over real HTTP.
 *
 * Usage:
 *   const judge = await startScriptedJudgeServer();            // default: grades like a plausible judge
 *   config.visual_coding_opencode_judge_base_url = judge.url;   // ends with /v1
 *   judge.setScript([{ status: 500 }, { verdict: 'equivalent' }]); // then back to default grading
 *   judge.requests[0].fields.gold                               // what the judge was shown
 *   await judge.close();
 *
 * Default grading (a reply of `'grade'`, an exhausted script array, or a script function returning
 * undefined) reads the fields of the judge prompt built by src/workers/judge/prompt.ts from the
 * last user message: a JSON object written between a line `{` and a line `}`, with the keys
 * `question`, `gold_answer`, `extracted_answer` and `response_end` (PROMPT_FIELDS); an extracted
 * answer equal to `[NO ANSWER WAS EXTRACTED]` (NO_EXTRACTED_ANSWER) means none. The verdict is
 * `equivalent` when the extracted answer and the gold answer are equal after normalising
 * (lower case, whitespace removed, one pair of surrounding parentheses and a trailing period
 * dropped: "(B)" = "b"), `different` otherwise, and `unsure` when the prompt has no gold answer.
 * When nothing was extracted it reads the end of the response as the fleet's rules ask a judge to:
 * `equivalent` when the last line with text states the gold answer (`is X`, `are X`, `answer X`,
 * `option X`; a number also as a word up to twenty: "there are twelve" = 12), else `different`.
 */
import http from 'node:http';
import { listen } from '../http/listen.ts';
import { NO_EXTRACTED_ANSWER, PROMPT_FIELDS } from '../workers/judge/prompt.ts';

/** One scripted answer to a request. */
export type ScriptedJudgeReply =
  /** 200 with assistant content `{"verdict": ..., "reason": ...}` (any verdict string, even invalid). */
  | { verdict: string; reason?: string }
  /** 200 with this assistant content, verbatim (prose, code fences, broken JSON...); `finishReason` default `stop` (`length`: cut at max_tokens). */
  | { content: string; finishReason?: string }
  /** A raw HTTP response; `body` is sent as JSON unless a string; default body: an OpenAI error object. */
  | { status: number; headers?: Record<string, string>; body?: unknown }
  /** Never answer (the client must time out); the socket is released by close(). */
  | { hang: true }
  /** Destroy the connection without any answer. */
  | { destroy: true }
  /** The default grading described above. */
  | 'grade';

/** The fields the default grader reads from a judge prompt (null when absent). */
export interface PromptFields {
  question: string | null;
  gold: string | null;
  /** null when absent or when the no-extracted-answer marker was sent. */
  extracted: string | null;
  /** True when the marker NO_EXTRACTED_ANSWER was sent. */
  noExtractedMarker: boolean;
  responseEnd: string | null;
}

export interface RecordedJudgeRequest {
  /** 0-based position among all requests this server received. */
  index: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: string;
  /** Parsed JSON body, or undefined if it was not JSON. */
  body: any;
  /** Text of the last user message ('' if none). */
  user: string;
  fields: PromptFields;
}

/** An array is consumed one reply per request; a function gets each request and its index. */
export type JudgeScript =
  | ScriptedJudgeReply[]
  | ((request: RecordedJudgeRequest, index: number) => ScriptedJudgeReply | undefined | Promise<ScriptedJudgeReply | undefined>);

export interface ScriptedJudgeServerOptions {
  /** Default: `'grade'` for every request. */
  script?: JudgeScript;
  /** Address to listen on; default 127.0.0.1 (a test host's own address in a network namespace). */
  host?: string;
  /** Port; default 0, any free port. */
  port?: number;
  /** The model `GET /v1/models` lists; default `scripted-judge`. */
  modelName?: string;
}

export interface ScriptedJudgeServer {
  /** Base URL for the openai client, e.g. `http://127.0.0.1:41234/v1`. */
  url: string;
  /** Every request received, in order (live array). */
  requests: RecordedJudgeRequest[];
  /** Replace the script; request indexes keep counting. */
  setScript(script: JudgeScript): void;
  /** Stop the server, dropping hung connections. */
  close(): Promise<void>;
}

/** The grading input object of a user message: the lines from a line `{` to the next line `}`. */
function inputObject(user: string): Record<string, unknown> {
  const lines = user.split('\n');
  const start = lines.indexOf('{');
  const end = lines.indexOf('}', start + 1);
  if (start < 0 || end < 0) return {};
  try {
    const parsed: unknown = JSON.parse(lines.slice(start, end + 1).join('\n'));
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Read the prompt fields of src/workers/judge/prompt.ts out of a user message. */
export function parsePromptFields(user: string): PromptFields {
  const input = inputObject(user);
  const field = (key: string): string | null => (typeof input[key] === 'string' ? (input[key] as string) : null);
  const extracted = field(PROMPT_FIELDS.extracted);
  const noExtractedMarker = extracted === NO_EXTRACTED_ANSWER;
  return {
    question: field(PROMPT_FIELDS.question),
    gold: field(PROMPT_FIELDS.gold),
    extracted: noExtractedMarker ? null : extracted,
    noExtractedMarker,
    responseEnd: field(PROMPT_FIELDS.response),
  };
}

function normalise(answer: string): string {
  let s = answer.toLowerCase().replace(/\s+/g, '').replace(/\.$/, '');
  if (/^\(.*\)$/.test(s)) s = s.slice(1, -1);
  return s;
}

const NUMBER_WORDS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen', 'twenty'];

/**
 * Whether the last line with text of a response states `gold` as its answer: `is X`, `are X`,
 * `answer X` or `option X` (numbers also as words up to twenty: "there are twelve" = 12).
 */
function statesGold(responseEnd: string, gold: string): boolean {
  const last = (responseEnd.split('\n').map((l) => l.trim()).filter(Boolean).pop() ?? '').toLowerCase();
  for (const m of last.matchAll(/\b(?:is|are|answer|option)\s+(?:option\s+)?\(?([\p{L}\p{N}.-]+)\)?/gu)) {
    const word = m[1].replace(/\.$/, '');
    const n = NUMBER_WORDS.indexOf(word);
    if (normalise(n >= 0 ? String(n) : word) === normalise(gold)) return true;
  }
  return false;
}

/** The default grader's verdict for a prompt. */
export function defaultGrade(fields: PromptFields): { verdict: string; reason: string } {
  if (fields.gold === null) return { verdict: 'unsure', reason: 'no gold answer in the prompt' };
  if (fields.extracted === null) {
    return statesGold(fields.responseEnd ?? '', fields.gold)
      ? { verdict: 'equivalent', reason: 'nothing was extracted, but the response ends stating the gold answer' }
      : { verdict: 'different', reason: 'nothing was extracted and the response states no matching answer' };
  }
  return normalise(fields.extracted) === normalise(fields.gold)
    ? { verdict: 'equivalent', reason: 'the answers match' }
    : { verdict: 'different', reason: 'the answers differ' };
}

function lastUserText(body: any): string {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const user = [...messages].reverse().find((m) => m?.role === 'user');
  if (!user) return '';
  if (typeof user.content === 'string') return user.content;
  if (Array.isArray(user.content)) return user.content.map((p: any) => (typeof p?.text === 'string' ? p.text : '')).join('\n');
  return '';
}

function completion(model: string, index: number, content: string, finishReason = 'stop'): object {
  return {
    id: `chatcmpl-scripted-${index}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: finishReason, logprobs: null }],
    usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
  };
}

function sendContent(res: http.ServerResponse, req: RecordedJudgeRequest, content: string, finishReason = 'stop'): void {
  const model = String(req.body?.model ?? 'scripted-judge');
  if (req.body?.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(model, req.index, content, finishReason)));
    return;
  }
  const base = { id: `chatcmpl-scripted-${req.index}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model };
  const chunks = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content }, finish_reason: null }] },
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: finishReason }] },
  ];
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end('data: [DONE]\n\n');
}

function sendReply(res: http.ServerResponse, req: RecordedJudgeRequest, reply: ScriptedJudgeReply): void {
  if (reply === 'grade') return sendContent(res, req, JSON.stringify(defaultGrade(req.fields)));
  if ('hang' in reply) return;
  if ('destroy' in reply) {
    res.socket?.destroy();
    return;
  }
  if ('verdict' in reply) return sendContent(res, req, JSON.stringify({ verdict: reply.verdict, reason: reply.reason ?? 'scripted' }));
  if ('content' in reply) return sendContent(res, req, reply.content, reply.finishReason);
  const body = reply.body ?? { error: { message: `scripted status ${reply.status}`, type: 'scripted_error', code: null } };
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(text);
}

function record(req: http.IncomingMessage, rawBody: string, index: number): RecordedJudgeRequest {
  let body: any;
  try {
    body = JSON.parse(rawBody);
  } catch {
    body = undefined;
  }
  const user = lastUserText(body);
  return { index, method: req.method ?? '', path: req.url ?? '', headers: req.headers, rawBody, body, user, fields: parsePromptFields(user) };
}

/** Start the server (default: 127.0.0.1, an ephemeral port). */
export async function startScriptedJudgeServer(options: ScriptedJudgeServerOptions = {}): Promise<ScriptedJudgeServer> {
  const requests: RecordedJudgeRequest[] = [];
  let script: JudgeScript = options.script ?? [];
  let queue: ScriptedJudgeReply[] = Array.isArray(script) ? [...script] : [];

  const next = async (rec: RecordedJudgeRequest): Promise<ScriptedJudgeReply> => {
    if (typeof script === 'function') return (await script(rec, rec.index)) ?? 'grade';
    return queue.shift() ?? 'grade';
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // The endpoint check of preflight: answered, not recorded (tests count grading requests).
      if (req.method === 'GET' && /\/models$/.test((req.url ?? '').split('?')[0])) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: options.modelName ?? 'scripted-judge', object: 'model', owned_by: 'scripted' }] }));
        return;
      }
      const rec = record(req, Buffer.concat(chunks).toString('utf8'), requests.length);
      requests.push(rec);
      if (req.method !== 'POST' || !/\/chat\/completions$/.test((req.url ?? '').split('?')[0])) {
        sendReply(res, rec, { status: 404, body: { error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } } });
        return;
      }
      next(rec).then(
        (reply) => sendReply(res, rec, reply),
        (err: unknown) => sendReply(res, rec, { status: 500, body: { error: { message: `script threw: ${String(err)}` } } }),
      );
    });
  });
  const listening = await listen(server, options.host ?? '127.0.0.1', options.port ?? 0);

  return {
    url: `${listening.origin}/v1`,
    requests,
    setScript(s) {
      script = s;
      queue = Array.isArray(s) ? [...s] : [];
    },
    close: listening.close,
  };
}
