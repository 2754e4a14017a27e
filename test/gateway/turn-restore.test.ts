/**
 * What the gateway sends upstream as the earlier assistant turns (src/gateway/turn-restore.ts):
 * restored as the server returned them (content without the parsers' stray newlines, reasoning under
 * both names, the server's arguments), carrying NeMo Gym's token fields when splicing, matched by
 * position and content (never by a model-written tool-call id alone); a message no turn matches goes
 * as OpenCode wrote it.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/gateway/chat-request.ts';
import { TurnRestorer, generatedContent } from '../../src/gateway/turn-restore.ts';

const fromServer = {
  role: 'assistant', content: '\n\nLet me check.\n', reasoning: '\nhm\n',
  tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command": "ls"}' } }],
};
const sentBack: ChatMessage = { role: 'assistant', content: 'Let me check.', reasoning_content: 'hm', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } }] };
const messages: ChatMessage[] = [{ role: 'user', content: 'q' }, sentBack, { role: 'tool', tool_call_id: 'c1', content: 'a' }];

describe('turn restore', () => {
  it('strips only the parsers\' whitespace', () => {
    expect(generatedContent(fromServer)).toBe('Let me check.');
    expect(generatedContent({ content: '  text  ' })).toBe('  text  ');
    expect(generatedContent({ content: null })).toBe('');
  });

  it('restores the turn, and with splicing carries its ids; off, sends the messages untouched', () => {
    const both = new TurnRestorer({ restore: true, splice: true });
    both.answered(fromServer, [1, 2], [3, 4], [-0.1, -0.2]);
    expect(both.shape(messages)[1]).toEqual({
      role: 'assistant', content: 'Let me check.', reasoning: '\nhm\n', reasoning_content: '\nhm\n',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command": "ls"}' } }],
      prompt_token_ids: [1, 2], generation_token_ids: [3, 4], generation_log_probs: [-0.1, -0.2],
    });
    const off = new TurnRestorer({ restore: false, splice: false });
    off.answered(fromServer, [1, 2], [3, 4], null);
    expect(off.shape(messages)).toBe(messages);
  });

  it('leaves a message no turn matches as OpenCode wrote it', () => {
    const r = new TurnRestorer({ restore: true, splice: true });
    r.answered({ ...fromServer, tool_calls: [{ id: 'other', type: 'function', function: { name: 'bash', arguments: '{}' } }] }, [1], [2], [-1]);
    expect(r.shape(messages)[1]).toEqual(sentBack);
  });

  it('a tool-call id the model wrote twice restores each turn as generated, with its own text, arguments and token ids', () => {
    const call = (command: string) => [{ id: 'functions.bash:0', type: 'function', function: { name: 'bash', arguments: `{"command": "${command}"}` } }];
    const turn1 = { role: 'assistant', content: '\n\nFirst I list.\n', reasoning: 'one', tool_calls: call('ls') };
    const turn2 = { role: 'assistant', content: '\n\nNow I count.\n', reasoning: 'two', tool_calls: call('wc -l a') };
    const r = new TurnRestorer({ restore: true, splice: true });
    r.answered(turn1, [1, 2], [10, 11], [-0.1, -0.1]);
    r.answered(turn2, [1, 2, 10, 11, 20], [30, 31], [-0.2, -0.2]);
    // As OpenCode sends them back: trimmed, compact arguments, the same id on both.
    const back = (content: string, command: string): ChatMessage => ({ role: 'assistant', content, tool_calls: [{ id: 'functions.bash:0', type: 'function', function: { name: 'bash', arguments: `{"command":"${command}"}` } }] });
    const history: ChatMessage[] = [
      { role: 'user', content: 'q' },
      back('First I list.', 'ls'), { role: 'tool', tool_call_id: 'functions.bash:0', content: 'a' },
      back('Now I count.', 'wc -l a'), { role: 'tool', tool_call_id: 'functions.bash:0', content: '1 a' },
    ];
    const out = r.shape(history) as unknown as Array<Record<string, any>>;
    expect(out[1]).toMatchObject({ content: 'First I list.', reasoning: 'one' });
    // Only the latest turn carries token ids: a splicing server continues from it.
    expect(out[1]!.prompt_token_ids).toBeUndefined();
    expect(out[1]!.tool_calls[0].function.arguments).toBe('{"command": "ls"}');
    expect(out[3]).toMatchObject({ content: 'Now I count.', reasoning: 'two', prompt_token_ids: [1, 2, 10, 11, 20], generation_token_ids: [30, 31] });
    expect(out[3]!.tool_calls[0].function.arguments).toBe('{"command": "wc -l a"}');
    // A message whose text or arguments are not the turn's is no turn of this id's: sent as written.
    const forged = back('Something else.', 'rm -rf /');
    expect(r.shape([{ role: 'user', content: 'q' }, forged])[1]).toEqual(forged);
  });

  it('turns without tool calls go by position and text: a turn missing from the history does not shift the others', () => {
    const r = new TurnRestorer({ restore: true, splice: true });
    r.answered({ role: 'assistant', content: '\nA\n', reasoning: 'ra' }, [1], [2], [0]);
    r.answered({ role: 'assistant', content: '\nB\n', reasoning: 'rb' }, [1, 2, 3], [4], [0]);
    const out = r.shape([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'B' }]) as unknown as Array<Record<string, any>>;
    expect(out[1]).toMatchObject({ reasoning: 'rb', generation_token_ids: [4] });
  });

  it('splicing keeps what the next call needs: heap at 120 turns within 2x that at 10, and so is the request', () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const BASE = 40_000; // a prompt with an image's tokens
    const PER_TURN = 100; // a generation and a tool output
    /** A session of n answered calls as the recorder sees them: each call's prompt is the whole conversation so far (a fresh array). */
    function session(n: number) {
      const r = new TurnRestorer({ restore: true, splice: true });
      const history: ChatMessage[] = [{ role: 'user', content: 'q' }];
      let length = BASE;
      for (let i = 0; i < n; i++) {
        const args = `{"command": "cat part-${i}"}`;
        const prompt = Array.from({ length }, (_, k) => k % 151_000);
        r.answered({ role: 'assistant', content: `step ${i}`, tool_calls: [{ id: `functions.bash:${i % 3}`, type: 'function', function: { name: 'bash', arguments: args } }] }, prompt, Array(PER_TURN / 2).fill(7), Array(PER_TURN / 2).fill(-0.5));
        history.push({ role: 'assistant', content: `step ${i}`, tool_calls: [{ id: `functions.bash:${i % 3}`, type: 'function', function: { name: 'bash', arguments: args } }] }, { role: 'tool', tool_call_id: `functions.bash:${i % 3}`, content: 'out' });
        length += PER_TURN;
      }
      return { r, history };
    }
    /** Heap one session's restorer keeps after a full GC, and its last request's size (a frame of its own: nothing of it outlives the call). */
    function measure(n: number): { heap: number; request: number } {
      gc();
      const before = process.memoryUsage().heapUsed;
      const s = session(n);
      const request = JSON.stringify(s.r.shape(s.history)).length;
      // What the session keeps is the restorer; the history is OpenCode's, sent anew with each call.
      s.history.length = 0;
      gc();
      const heap = process.memoryUsage().heapUsed - before;
      expect(s.r).toBeDefined();
      return { heap, request };
    }
    /** The least of three tries (a loaded host adds noise, never takes it away). */
    function heapOf(n: number): { heap: number; request: number } {
      const tries = [measure(n), measure(n), measure(n)];
      return { heap: Math.min(...tries.map((t) => t.heap)), request: tries[0]!.request };
    }
    const at10 = heapOf(10);
    const at120 = heapOf(120);
    const say = `heap ${at10.heap} -> ${at120.heap} bytes, request ${at10.request} -> ${at120.request} bytes`;
    expect(at120.heap / at10.heap, say).toBeLessThanOrEqual(2);
    expect(at120.request / at10.request, say).toBeLessThanOrEqual(2);
    console.log(`turn-restore splicing: ${say} (ratios ${(at120.heap / at10.heap).toFixed(2)}, ${(at120.request / at10.request).toFixed(2)})`);
  });
});
