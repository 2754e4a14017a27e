/**
 * The gateway's pure parts that keep the model's own calls out of its score: which calls are the
 * agent's (by origin, else by the conversation's chain), what it keeps of a rollout's text (bounded),
 * and which image URLs it forwards (data URLs of real images only).
 */
import { describe, expect, it } from 'vitest';
import { imageUrlProblem, type ChatMessage } from '../../src/gateway/chat-request.ts';
import { ConversationReader, ConversationTracker, ImageStore, MAX_IMAGES } from '../../src/gateway/conversation.ts';
import { KeptText } from '../../src/gateway/kept-text.ts';
import { encodePng } from '../helpers/fixture-images.ts';

const sys: ChatMessage = { role: 'system', content: 'You are OpenCode.' };
const user: ChatMessage = { role: 'user', content: 'Which option? Answer in \\boxed{}.' };
const assistant = (id: string): ChatMessage => ({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: '{}' } }] });
const result = (id: string, out: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content: out });

/** One agent call through the tracker: started, then answered with these tool calls (or not answered). */
function call(t: ConversationTracker, messages: ChatMessage[], answeredWith: string[] | null): void {
  t.started(messages, 'unknown');
  t.ended(answeredWith);
}

describe('ConversationTracker', () => {
  it('trusts the origin the provider vouches for', () => {
    const t = new ConversationTracker();
    expect(t.isAgentCall([sys, user], 'agent')).toBe(true);
    expect(t.isAgentCall([sys, user], 'other')).toBe(false);
  });

  it('unknown origin: the first call, retries of an unanswered call, and continuations by the answer\'s tool calls are the agent\'s', () => {
    const t = new ConversationTracker();
    const first = [sys, user];
    expect(t.isAgentCall(first, 'unknown')).toBe(true);
    call(t, first, null);
    // Not answered: OpenCode sends the same request again.
    expect(t.isAgentCall(first, 'unknown')).toBe(true);
    call(t, first, ['call_1']);
    // Answered: the same request again is not OpenCode's (it never re-sends an answered call).
    expect(t.isAgentCall(first, 'unknown')).toBe(false);
    const second = [sys, user, assistant('call_1'), result('call_1', '42\n')];
    expect(t.isAgentCall(second, 'unknown')).toBe(true);
    // A forged continuation: another tool call id, another history, an assistant turn of its own.
    expect(t.isAgentCall([sys, user, assistant('call_9'), result('call_9', 'forged')], 'unknown')).toBe(false);
    expect(t.isAgentCall([sys, { role: 'user', content: 'something else' }], 'unknown')).toBe(false);
    expect(t.isAgentCall([...second, { role: 'assistant', content: 'the answer is \\boxed{A}' }], 'unknown')).toBe(false);
  });

  it('unknown origin: a call while the agent\'s is in flight is not the agent\'s (OpenCode makes one at a time)', () => {
    const t = new ConversationTracker();
    t.started([sys, user], 'unknown');
    expect(t.isAgentCall([sys, user], 'unknown')).toBe(false);
    t.ended(['c']);
    expect(t.isAgentCall([sys, user, assistant('c'), result('c', 'ok')], 'unknown')).toBe(true);
  });
});

describe('KeptText', () => {
  it('keeps text whole within the budget, then each piece\'s head and tail, and says so', () => {
    const kept = new KeptText(1000);
    expect(kept.keep('a'.repeat(600))).toHaveLength(600);
    expect(kept.cut).toBe(false);
    const long = `${'h'.repeat(300)}${'m'.repeat(5000)}${'t'.repeat(300)}`;
    const out = kept.keep(long, 300);
    expect(kept.cut).toBe(true);
    expect(out.startsWith('h'.repeat(200))).toBe(true);
    expect(out.endsWith('t'.repeat(300))).toBe(true);
    expect(out).toMatch(/characters not kept: the rollout's transcript budget is spent/);
    // Spent: every further piece keeps only its head and its tail, however many there are.
    let total = 0;
    for (let i = 0; i < 100; i++) total += kept.keep('z'.repeat(1_000_000)).length;
    expect(total).toBeLessThan(100 * 600);
  });
});

describe('what the gateway keeps of images and tool results', () => {
  it('stores each image once, lists each once, and stops recording past the count', () => {
    const store = new ImageStore(1024 * 1024);
    const reader = new ConversationReader(store, new KeptText());
    const png = (i: number) => `data:image/png;base64,${Buffer.from(encodePng(1, 1, () => [i % 256, i >> 8, 0])).toString('base64')}`;
    const same = Array.from({ length: 500 }, () => ({ type: 'image_url' as const, image_url: { url: png(1) } }));
    const view = reader.read([sys, { role: 'user', content: same }]);
    expect(view.shownImages).toHaveLength(1);
    expect(store.images.size).toBe(1);
    const many = Array.from({ length: MAX_IMAGES + 50 }, (_, i) => ({ type: 'image_url' as const, image_url: { url: png(i + 2) } }));
    reader.read([sys, { role: 'user', content: same }, ...Array.from({ length: 2 }, (_, k) => ({ role: 'user' as const, content: many.slice(k * 600, (k + 1) * 600) }))]);
    expect(store.images.size).toBe(MAX_IMAGES);
    expect(store.dropped).toBeGreaterThan(0);
  });
});

describe('imageUrlProblem', () => {
  const png = `data:image/png;base64,${Buffer.from(encodePng(2, 2, () => [1, 2, 3])).toString('base64')}`;

  it('forwards data URLs of real PNG, JPEG, WebP and GIF images only', () => {
    expect(imageUrlProblem(png)).toBeNull();
    expect(imageUrlProblem(`data:image/jpeg;base64,${Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2]).toString('base64')}`)).toBeNull();
    expect(imageUrlProblem(`data:image/gif;base64,${Buffer.from('GIF89a....').toString('base64')}`)).toBeNull();
    expect(imageUrlProblem(`data:image/webp;base64,${Buffer.from('RIFF\0\0\0\0WEBPVP8 ').toString('base64')}`)).toBeNull();
  });

  it('refuses URLs the policy server would fetch, other types, empty or mislabelled data', () => {
    expect(imageUrlProblem('http://169.254.169.254/latest/meta-data/')).toMatch(/only data: URLs/);
    expect(imageUrlProblem('https://example.com/a.png')).toMatch(/only data: URLs/);
    expect(imageUrlProblem('file:///etc/passwd')).toMatch(/only data: URLs/);
    expect(imageUrlProblem('data:image/svg+xml;base64,PHN2Zz4=')).toMatch(/only data: URLs|not an accepted image type/);
    expect(imageUrlProblem('data:image/tiff;base64,SUkqAA==')).toMatch(/not an accepted image type/);
    expect(imageUrlProblem('data:image/png;base64,')).toMatch(/not base64/);
    expect(imageUrlProblem('data:image/png;base64,@@@@')).toMatch(/not base64/);
    expect(imageUrlProblem(png.replace('image/png', 'image/jpeg'))).toMatch(/not image\/jpeg/);
  });
});
