/**
 * What the gateway sends upstream as the earlier assistant turns (src/gateway/turn-restore.ts):
 * restored as the server returned them (content without the parsers' stray newlines, reasoning under
 * both names, the server's arguments), carrying NeMo Gym's token fields when splicing, matched by
 * tool-call ids; a message no turn matches goes as OpenCode wrote it.
 */
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
});
