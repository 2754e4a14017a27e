/**
 * The real-template test server's own parts (test/helpers/qwen3-policy-server.ts), without OpenCode:
 * vLLM's parsers as it plays them (hermes re-spaces arguments Python-style and keeps the newline
 * before `<tool_call>`; qwen3 splits the think block off), the three breaks on a plain server, and
 * splicing anchored on the n-th `<|im_end|>`, which keeps the tool response even where the earlier
 * turn re-renders shorter (anchoring by token position would drop part of it).
 */
import { describe, expect, it } from 'vitest';
import { IM_END, parseGeneration, promptIds, pyJson, qwen3 } from './qwen3-policy-server.ts';

type Json = Record<string, unknown>;
const plain = { reasoningField: 'reasoning' as const, splice: false, contextWindow: 1 << 20 };
const user: Json = { role: 'user', content: 'Which half is red?' };
const tool: Json = { role: 'tool', tool_call_id: 'c0', content: 'left-is-red' };

/** The first call's prompt and generation, and the second call's messages as OpenCode sends them back. */
function exchange(raw: string, sentBack: (message: Json) => Json) {
  const first = promptIds({ messages: [user] }, plain).ids;
  const gen = [...qwen3().encode(raw), IM_END];
  const message = parseGeneration(raw, 0);
  return { first, gen, message, messages: [user, sentBack(message), tool] };
}

const extendsTip = (prompt: number[], tip: number[]) => tip.every((id, i) => prompt[i] === id);

describe('the Qwen3 test server', () => {
  it('parses as vLLM does: arguments re-spaced Python-style, the newline before <tool_call> kept, the think block apart', () => {
    expect(pyJson({ command: 'ls', n: [1, { a: true }] })).toBe('{"command": "ls", "n": [1, {"a": true}]}');
    const m = parseGeneration('<think>\nhm\n</think>\n\nLet me check.\n<tool_call>\n{"name": "bash", "arguments": {"command":"ls"}}\n</tool_call>', 0);
    expect(m).toMatchObject({ reasoning: '\nhm\n', content: '\n\nLet me check.\n', tool_calls: [{ function: { name: 'bash', arguments: '{"command": "ls"}' } }] });
  });

  it('a turn in the template\'s own format chains; compact arguments, a dropped think block and a stray newline break it', () => {
    const call = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';
    const asSent = (m: Json): Json => ({ role: 'assistant', content: m.content ?? '', tool_calls: m.tool_calls, reasoning_content: m.reasoning ?? undefined });
    for (const [raw, chains] of [
      [call, true],
      ['<tool_call>\n{"name": "bash", "arguments": {"command":"ls"}}\n</tool_call>', false],
      [`<think>\nhm\n</think>\n\n${call}`, false],
      [`Let me check.\n${call}`, false],
    ] as const) {
      const x = exchange(raw, asSent);
      expect(extendsTip(promptIds({ messages: x.messages }, plain).ids, [...x.first, ...x.gen]), raw).toBe(chains);
    }
  });

  it('splices on the n-th <|im_end|>: the prefix, then the tool response whole, even when the earlier turn re-renders shorter', () => {
    const raw = '<think>\nA long thought that the template will drop.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>';
    const x = exchange(raw, (m) => ({ role: 'assistant', content: '', tool_calls: m.tool_calls }));
    const unspliced = promptIds({ messages: x.messages }, plain).ids;
    expect(extendsTip(unspliced, [...x.first, ...x.gen])).toBe(false);
    const carried = x.messages.map((m) => (m.role === 'assistant' ? { ...m, prompt_token_ids: x.first, generation_token_ids: x.gen } : m));
    const spliced = promptIds({ messages: carried }, { ...plain, splice: true });
    expect(spliced.spliced).toBe(true);
    const tip = [...x.first, ...x.gen];
    expect(spliced.ids.slice(0, tip.length)).toEqual(tip);
    // What follows is what the template puts after the re-rendered assistant turn: the tool response and the generation prompt.
    const rest = spliced.ids.slice(tip.length);
    const closing = unspliced.reduce<number[]>((at, id, i) => (id === IM_END ? [...at, i] : at), [])[tip.filter((id) => id === IM_END).length - 1];
    expect(rest).toEqual(unspliced.slice(closing + 1));
    expect(spliced.ids.length).toBeGreaterThan(unspliced.length);
    expect(qwen3().encode('\n<tool_response>\nleft-is-red\n</tool_response>').every((id) => rest.includes(id))).toBe(true);
  });
});
