/**
 * `vcfleet run` on a real terminal (tmux, 120x30) with a policy server that refuses every call
 * (preflight skipped), the real OpenCode in real sandboxes: log lines print above the progress bar
 * and never into it, repeated warnings are folded into a count on the bar, and after Ctrl-C the
 * summary table and the exit line are written on a clean screen.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../src/all-in-one/private-redis.ts';
import { useScriptedJudge } from '../../helpers/scripted-judge-server.ts';
import { FAKE_POLICY_KEY, makeFleetEnv, waitFor, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V']);
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!hasTmux)('vcfleet run on a terminal: one renderer owns the screen', () => {
  const socket = `vcfleet-test-${randomBytes(4).toString('hex')}`;
  const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
  /** The whole pane, its scrollback included, as the user sees it (trailing blanks trimmed). */
  const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-', '-t', 'run').split('\n').map((l) => l.trimEnd());
  const judge = useScriptedJudge();
  let env: FleetEnv;
  beforeAll(async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: judge.url });
  });
  afterAll(async () => {
    try {
      tmux('kill-server');
    } catch {
      // already gone
    }
    await env.cleanup();
    removeTmpDirs();
  });

  it('warnings above the bar, repeats folded into it, a clean summary after Ctrl-C', async () => {
    const dead = `http://127.0.0.1:${await freePort()}/v1`;
    const args = ['run', '--run-id', 'tty-1', '--skip-preflight', ...env.overrides, '++agent.kind=opencode', `++policy_base_url=${dead}`,
      '++policy_model_name=scripted-vlm', '++limit=2', '++queues.fail_fast_after=1000', '++queues.rollout_backoff_ms=500', '++task_timeout_s=120'];
    const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const command = `cd ${ROOT} && env -i PATH="$PATH" HOME="$HOME" TERM=xterm-256color POLICY_API_KEY=${FAKE_POLICY_KEY} node bin/vcfleet.js ${quoted}; echo "EXIT=$?"`;
    tmux('new-session', '-d', '-s', 'run', '-x', '120', '-y', '30', 'bash', '--norc', '--noprofile');
    tmux('send-keys', '-t', 'run', command, 'Enter');
    // The bar is up and the rollouts failed on the dead policy more than once (warnings came).
    await waitFor('warnings and the bar on the screen', async () => {
      const lines = screen();
      return lines.some((l) => /WARN/.test(l)) && lines.some((l) => /\d+\/2 \| running/.test(l)) && lines.join('\n').includes('warnings (last:');
    }, 240_000, 500);
    tmux('send-keys', '-t', 'run', 'C-c');
    await waitFor('vcfleet to exit', async () => screen().some((l) => /^EXIT=\d+$/.test(l)), 120_000, 500);
    const lines = screen();
    const shown = lines.join('\n');
    if (process.env.WT34_DUMP) (await import('node:fs')).writeFileSync(process.env.WT34_DUMP, shown);
    // No log line was glued onto the bar: a line with the bar's text holds nothing else.
    for (const line of lines.filter((l) => /\| running \d+ \| masked/.test(l))) expect(line, shown).not.toMatch(/WARN|ERROR|INFO|SIGINT/);
    // Each warning's reason printed once at most; its repeats were counted, not printed.
    const warnings = lines.filter((l) => /WARN/.test(l)).map((l) => l.replace(/^\[[\d:.]+\] /, ''));
    expect(new Set(warnings).size, shown).toBe(warnings.length);
    expect(shown).toMatch(/repeated warning\(s\) not printed again; the last: /);
    // After Ctrl-C: the summary table on clean lines, then the exit line.
    expect(lines, shown).toContainEqual(expect.stringMatching(/^status +stopped \(0\/2 rollouts\)$/));
    expect(lines, shown).toContainEqual(expect.stringMatching(/^stopped at 0\/2 rows; resume with `node bin\/vcfleet\.js run --run-id tty-1/));
    expect(lines, shown).toContain('EXIT=4');
  }, 420_000);
});
