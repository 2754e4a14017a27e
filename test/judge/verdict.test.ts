import { describe, expect, it } from 'vitest';
import { findJsonObjects, parseVerdict } from '../../src/workers/judge/verdict.ts';

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

  it('skips braces in prose and strings', () => {
    const text = 'The set {1, 2} vs {"verdict": "different", "reason": "a } inside a string"}';
    expect(parseVerdict(text)).toEqual({ ok: true, verdict: 'different', reason: 'a } inside a string' });
  });

  it('uses the last object that carries a verdict', () => {
    const text = 'Format: {"verdict": "unsure"}. Final: {"verdict": "equivalent", "reason": "r"}';
    expect(parseVerdict(text)).toMatchObject({ ok: true, verdict: 'equivalent' });
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

describe('findJsonObjects', () => {
  it('finds nested objects as one top-level object', () => {
    expect(findJsonObjects('a {"x": {"y": 1}} b {"z": 2}')).toEqual([{ x: { y: 1 } }, { z: 2 }]);
  });
});
