/**
 * The logger's lines on a piped stderr (not a terminal): one compact human line per event, each
 * field cut short, unless JSON is asked for (`VCFLEET_LOG_JSON=1`, `log_json`), which keeps every byte.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { compactDestination, createLogger } from '../../src/shared/logger.ts';

const run = promisify(execFile);
const stderrOf = async (env: Record<string, string>) =>
  (await run('node', ['bin/run-ts.js', 'test/helpers/log-one-event.ts'], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env } })).stderr;

describe('logs on a piped stderr', () => {
  it('are one compact human line per event, not a 1,000-character JSON line', async () => {
    const text = await stderrOf({});
    const lines = text.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d WARN the judge call failed; retrying {2}role=results rollout_id=r-1 detail=x+…/);
    expect(lines[0].length).toBeLessThanOrEqual(400);
    expect(() => JSON.parse(lines[0])).toThrow();
  }, 30_000);

  it('are JSON lines, every field whole, with VCFLEET_LOG_JSON=1', async () => {
    const event = JSON.parse((await stderrOf({ VCFLEET_LOG_JSON: '1' })).trim()) as { msg: string; detail: string };
    expect(event.msg).toBe('the judge call failed; retrying');
    expect(event.detail).toHaveLength(900);
  }, 30_000);

  it('scrubs secrets from the compact line too', () => {
    const out: string[] = [];
    const logger = createLogger({ secrets: ['sk-SECRET-123'], destination: compactDestination((t) => out.push(t)) });
    logger.warn({ api_key: 'sk-SECRET-123', url: 'http://x/?k=sk-SECRET-123' }, 'calling with sk-SECRET-123');
    expect(out.join('')).not.toContain('sk-SECRET-123');
    expect(out.join('')).toContain('calling with ***');
  });
});
