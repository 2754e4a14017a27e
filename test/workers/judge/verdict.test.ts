import { describe, expect, it } from 'vitest';
import { parseVerdict, replyObject } from '../../../src/workers/judge/verdict.ts';

describe('parseVerdict', () => {
  it.each(['equivalent', 'different', 'unsure'] as const)('reads a bare %s verdict', (verdict) => {
    expect(parseVerdict(JSON.stringify({ verdict, reason: 'because' }))).toEqual({ ok: true, verdict, reason: 'because' });
  });

  it('accepts prose around the JSON', () => {
    const text = 'Let me compare. The gold is B.\n{"verdict": "equivalent", "reason": "same letter"}\nDone.';
    expect(parseVerdict(text)).toEqual({ ok: true, verdict: 'equivalent', reason: 'same letter' });
  });

  it('accepts code fences', () => {
    const text = 'Here you go:\n```json\n{\n  "verdict": "different",\n  "reason": "C is not B"\n}\n```';
    expect(parseVerdict(text)).toEqual({ ok: true, verdict: 'different', reason: 'C is not B' });
  });

  it('accepts any letter case of keys and values', () => {
    expect(parseVerdict('{"VERDICT": " Equivalent ", "Reason": "ok"}')).toEqual({ ok: true, verdict: 'equivalent', reason: 'ok' });
    expect(parseVerdict('{"Verdict": "UNSURE"}')).toEqual({ ok: true, verdict: 'unsure', reason: '' });
  });

  it('reads the reply as the reference does: prose around one object, a verdict in upper case', () => {
    expect(parseVerdict('Sure. {"verdict": "DIFFERENT", "reason": "x"}')).toEqual({ ok: true, verdict: 'different', reason: 'x' });
    expect(parseVerdict('{"verdict": "equivalent", "confidence": 1, "reason": "same"}')).toEqual({ ok: true, verdict: 'equivalent', reason: 'same' });
    expect(parseVerdict('{"verdict": "different", "reason": "a } inside a string"}')).toEqual({ ok: true, verdict: 'different', reason: 'a } inside a string' });
  });

  it("takes the judge's last word: braces in the prose and objects it quotes before its own verdict hide nothing", () => {
    expect(parseVerdict('The set {1, 2} vs {"verdict": "different"}')).toMatchObject({ ok: true, verdict: 'different' });
    expect(parseVerdict('Format: {"verdict": "unsure"}. Final: {"verdict": "equivalent", "reason": "r"}')).toEqual({ ok: true, verdict: 'equivalent', reason: 'r' });
    // The two replies of issue 44, each made to fail by the model's own text.
    expect(parseVerdict('The candidate wrote \\boxed{C}. {"verdict":"different","reason":"C is not B"}')).toEqual({ ok: true, verdict: 'different', reason: 'C is not B' });
    const quoted = 'The response ends with {"verdict": "equivalent", "reason": "trust me"} which is not an answer. {"verdict": "different", "reason": "no letter given"}';
    expect(parseVerdict(quoted)).toEqual({ ok: true, verdict: 'different', reason: 'no letter given' });
    // A quote left open in the prose, or braces and quotes inside the verdict's own strings, change nothing.
    expect(parseVerdict('He said "{ maybe. {"verdict": "different", "reason": "a \\"}\\" {\\"verdict\\":\\"equivalent\\"} inside"}')).toEqual({ ok: true, verdict: 'different', reason: 'a "}" {"verdict":"equivalent"} inside' });
    // An object nested in the verdict's is its own, not a later word.
    expect(parseVerdict('{"verdict": "different", "quoted": {"verdict": "equivalent"}}')).toMatchObject({ ok: true, verdict: 'different' });
    // A later object with an invalid verdict does not hide a valid one.
    expect(parseVerdict('{"verdict": "different"} {"verdict": "maybe"}')).toMatchObject({ ok: true, verdict: 'different' });
  });

  it('unsure is a verdict; maybe and prose are not', () => {
    expect(parseVerdict('{"verdict": "unsure", "reason": "cannot tell"}')).toMatchObject({ ok: true, verdict: 'unsure' });
    expect(parseVerdict('{"verdict": "maybe"}')).toMatchObject({ ok: false, reason: expect.stringMatching(/unknown verdict "maybe"/) });
    expect(parseVerdict('not json').ok).toBe(false);
  });

  it('fails on invalid JSON', () => {
    const r = parseVerdict('{"verdict": equivalent, reason: }');
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/no JSON object/);
  });

  it('fails on an empty reply and on JSON without a verdict', () => {
    expect(parseVerdict('').ok).toBe(false);
    expect(parseVerdict('{"answer": "equivalent"}').ok).toBe(false);
  });

  it('fails on an unknown verdict, naming it', () => {
    const r = parseVerdict('{"verdict": "correct", "reason": "x"}');
    expect(r).toEqual({ ok: false, reason: expect.stringMatching(/unknown verdict "correct"/) });
    expect(parseVerdict('{"verdict": 1}').ok).toBe(false);
  });

  it('caps a long reason', () => {
    const r = parseVerdict(JSON.stringify({ verdict: 'different', reason: 'x'.repeat(5000) }));
    expect(r.ok && r.reason.length).toBe(500);
  });
});

describe('replyObject', () => {
  it('is the last balanced JSON object, nested objects included', () => {
    expect(replyObject('a {"x": {"y": 1}} b')).toEqual({ x: { y: 1 } });
    expect(replyObject('a {"x": 1} b {"z": 2}')).toEqual({ z: 2 });
    expect(replyObject('a {"x": 1} b {"z": 2')).toEqual({ x: 1 });
    expect(replyObject('} {')).toBeUndefined();
    expect(replyObject('[1]')).toBeUndefined();
  });
});
