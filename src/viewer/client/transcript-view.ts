/**
 * A transcript's parts as DOM: the puzzle, each turn (assistant text, tool calls with arguments,
 * output and images), the images where the model saw them. Everything the model wrote is untrusted
 * and goes in as text.
 */
import type { TranscriptRecord, TranscriptToolCall, TranscriptTurn } from '../../shared/records/transcript.ts';
import { h, num } from './dom.ts';
import { urls } from './routes.ts';

/** Outputs longer than this (characters or lines) start collapsed. */
const LONG_CHARS = 2000;
const LONG_LINES = 25;

/** An image by SHA-256, linked to its full size. */
export function imageFigure(sha: string, caption: string): HTMLElement {
  const src = urls.image(sha);
  return h('figure', { class: 'shot' },
    h('a', { href: src, target: '_blank', rel: 'noopener' }, h('img', { src, alt: `${caption} (${sha.slice(0, 12)})`, 'data-sha': sha })),
    h('figcaption', null, `${caption} · ${sha.slice(0, 12)}…`));
}

/** A block of untrusted text; collapsed behind a summary when long (or when `collapsed`). */
export function textBlock(label: string, text: string, opts: { cls?: string; collapsed?: boolean } = {}): HTMLElement {
  const lines = text.split('\n').length;
  const long = text.length > LONG_CHARS || lines > LONG_LINES;
  const pre = h('pre', { class: opts.cls ?? 'text' }, text);
  const open = !(opts.collapsed ?? long);
  return h('details', { class: `block ${opts.cls ?? ''}`, open },
    h('summary', null, `${label} `, h('span', { class: 'size' }, `(${num(lines)} lines, ${num(text.length)} chars${long ? ', long' : ''})`)), pre);
}

/** Tool arguments as the model wrote them, pretty-printed when they are a JSON object. */
function prettyArguments(raw: string): string {
  try {
    const value: unknown = JSON.parse(raw);
    return typeof value === 'object' && value !== null ? JSON.stringify(value, null, 2) : raw;
  } catch {
    return raw;
  }
}

function toolCall(call: TranscriptToolCall): HTMLElement {
  const output = call.output === null
    ? h('p', { class: 'note' }, 'no output: the session ended before the next policy call')
    : textBlock('output', call.output, { cls: 'tool-output' });
  return h('details', { class: 'tool-call', open: true, 'data-tool': call.name, 'data-call': call.id },
    h('summary', null, h('code', { class: 'tool-name' }, call.name), ` ${call.id}`),
    h('div', { class: 'tool-args' }, h('div', { class: 'label' }, 'arguments'), h('pre', { class: 'args' }, prettyArguments(call.arguments))),
    output,
    call.images.length ? h('div', { class: 'images' }, ...call.images.map((sha, i) => imageFigure(sha, `image ${i + 1} returned by ${call.name}`))) : '',
  );
}

function turnFacts(t: TranscriptTurn): string {
  const tokens = `${t.input_tokens ?? '?'} in / ${t.output_tokens ?? '?'} out tokens`;
  return [`finish ${t.finish_reason ?? '–'}`, tokens, `${(t.latency_ms / 1000).toFixed(2)} s`, `HTTP ${t.status ?? '–'}`].join(' · ');
}

export function turnView(t: TranscriptTurn): HTMLElement {
  return h('section', { class: 'turn', id: `turn-${t.index}`, 'data-turn': t.index },
    h('h3', null, `Turn ${t.index + 1}`, h('span', { class: 'turn-facts' }, turnFacts(t))),
    t.error ? h('p', { class: 'error' }, `policy call failed: ${t.error}`) : '',
    t.shown_images.length ? h('div', { class: 'images shown' }, ...t.shown_images.map((sha, i) => imageFigure(sha, t.index === 0 && i === 0 ? 'shown to the model (the puzzle)' : 'shown to the model'))) : '',
    t.reasoning ? textBlock('reasoning', t.reasoning, { cls: 'reasoning', collapsed: true }) : '',
    t.text ? h('div', { class: 'assistant' }, h('div', { class: 'label' }, 'assistant'), h('pre', { class: 'text' }, t.text)) : h('p', { class: 'note' }, 'no assistant text'),
    ...t.tool_calls.map(toolCall),
  );
}

export function puzzleView(r: TranscriptRecord): HTMLElement {
  const task = r.task;
  return h('section', { class: 'puzzle' },
    h('h2', null, 'Puzzle'),
    h('div', { class: 'puzzle-body' },
      imageFigure(task.image_sha256, 'the puzzle'),
      h('div', null,
        h('div', { class: 'label' }, 'question'), h('pre', { class: 'text question' }, task.question),
        task.options.length ? h('ol', { class: 'options', type: 'A' }, ...task.options.map((o) => h('li', null, o))) : '',
        h('p', null, h('span', { class: 'label' }, 'gold answer '), h('code', { class: 'gold' }, task.gold), ` (${task.ans_type})`),
        textBlock('prompt sent to the agent', task.prompt, { collapsed: true }),
      )),
  );
}
