/**
 * The command line as a new user types it: printed commands start the way the CLI was invoked
 * (npx, the installed bin, or `node bin/vcfleet.js`) and work when pasted into a shell; settings
 * typed the wrong way get the form that works; `--help` names the settings and the environment;
 * `--version`; text settings take number-like values.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { commandPrefix } from '../../src/cli/invocation.ts';
import { loadConfig } from '../../src/shared/config/load.ts';
import { CLI, pasteInShell, runCli } from '../helpers/fleet.ts';
import { createTmpDir, removeTmpDirs } from '../helpers/tmp.ts';

afterEach(removeTmpDirs);

const repo = fileURLToPath(new URL('../..', import.meta.url));
const version = (JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { version: string }).version;

describe('how the CLI was invoked decides how its advice starts', () => {
  const bin = path.join(repo, 'bin/vcfleet.js');
  const launcher = path.join(repo, 'vcfleet');
  it('the launcher as typed, npx, npm run, the installed bin, node with a path', () => {
    expect(commandPrefix({ env: { VCFLEET_LAUNCHER: './vcfleet' }, script: bin, cwd: repo })).toBe('./vcfleet');
    expect(commandPrefix({ env: { VCFLEET_LAUNCHER: '../vcfleet' }, script: bin, cwd: path.join(repo, 'docs') })).toBe('../vcfleet');
    expect(commandPrefix({ env: { VCFLEET_LAUNCHER: '/a dir/vcfleet' }, script: bin, cwd: '/tmp' })).toBe(`'/a dir/vcfleet'`);
    expect(commandPrefix({ env: { VCFLEET_LAUNCHER: 'vcfleet' }, script: bin, cwd: repo })).toBe('./vcfleet'); // `sh vcfleet`
    expect(commandPrefix({ env: { VCFLEET_LAUNCHER: '/usr/local/bin/vcfleet', PATH: '/usr/bin:/usr/local/bin' }, script: bin, cwd: '/tmp' })).toBe('vcfleet');
    // npx from the checkout: the launcher (npx is not transparent to Ctrl-C and kill); without one, npx.
    const npx = { npm_command: 'exec', npm_lifecycle_event: 'npx' };
    expect(commandPrefix({ env: npx, script: bin, cwd: repo, launcher })).toBe('./vcfleet');
    expect(commandPrefix({ env: npx, script: bin, cwd: path.join(repo, 'docs'), launcher })).toBe('../vcfleet');
    expect(commandPrefix({ env: npx, script: bin, cwd: '/elsewhere/project', launcher: null })).toBe('npx vcfleet');
    expect(commandPrefix({ env: { npm_lifecycle_event: 'vcfleet', npm_command: 'run-script' }, script: bin, cwd: repo })).toBe('npm run vcfleet --');
    expect(commandPrefix({ env: {}, script: '/usr/local/bin/vcfleet', cwd: '/home/u' })).toBe('vcfleet');
    expect(commandPrefix({ env: {}, script: bin, cwd: repo })).toBe('node bin/vcfleet.js');
    // A folder the checkout is not under (the checkout itself may be under /tmp): the absolute path.
    expect(commandPrefix({ env: {}, script: bin, cwd: path.join(repo, 'docs') })).toBe(`node ${bin}`);
    expect(commandPrefix({ env: {}, script: '/a dir/bin/vcfleet.js', cwd: '/tmp' })).toBe(`node '/a dir/bin/vcfleet.js'`);
  });

  // Its own state folder: the checkout's private Redis (a demo run there) is not this test's business.
  const isolated = () => {
    const empty = createTmpDir('vcfleet-usage-');
    mkdirSync(path.join(empty, 'results'));
    return `++output_root=${empty} ++state_dir=${path.join(empty, 'state')}`;
  };
  const advice = (out: string) => /e\.g\. (.+ view results\/babyvision_opencode\.jsonl.*)/.exec(out)?.[1];

  it('run as `./vcfleet` or `npx vcfleet`, it advises `./vcfleet …`; that advice, pasted, gives the same answer', async () => {
    const settings = isolated();
    for (const typed of ['./vcfleet', 'npx vcfleet']) {
      const r = await pasteInShell(`${typed} view --port 0 ${settings}`);
      expect(r.code, r.output).toBe(2);
      const printed = advice(r.output)!;
      expect(printed, r.output).toBe(`./vcfleet view results/babyvision_opencode.jsonl ${settings}`);
      const pasted = await pasteInShell(printed);
      expect(pasted.code, pasted.output).toBe(2);
      expect(pasted.output).toContain('results/babyvision_opencode.jsonl');
    }
    const direct = await runCli(['view', ...settings.split(' ')]);
    expect(direct.code, direct.output).toBe(2);
    const printed = advice(direct.output)!;
    expect(printed).toBe(`${CLI} view results/babyvision_opencode.jsonl ${settings}`);
    // Pasted as printed into a shell with nothing else set: the CLI runs (exit 2: no such file), not exit 127.
    const pasted = await pasteInShell(printed);
    expect(pasted.code, pasted.output).toBe(2);
    expect(pasted.output).toContain('results/babyvision_opencode.jsonl');
  }, 120_000);
});

describe('settings typed the wrong way, --help, --version', () => {
  it('--limit=2 and limit=2: exit 2 with "did you mean `++limit=2`"', async () => {
    for (const arg of ['--limit=2', 'limit=2', '--policy.token_capture=true']) {
      const r = await runCli(['run', arg]);
      expect(r.code, r.output).toBe(2);
      const key = arg.replace(/^-+/, '');
      expect(r.output).toContain(`did you mean \`++${key}\`?`);
    }
    // An option of the command written with `=` is the option, not a setting.
    const option = await runCli(['run', '--benchmark=nope']);
    expect(option.output).not.toContain('did you mean');
  }, 60_000);

  it('an option the command does not have: exit 2 with the nearest of its options or settings (`run --limt 2`, `runs --limt 5`), an unknown command too', async () => {
    const cases: Array<[string[], string]> = [
      [['run', '--limt', '2'], "unknown option '--limt' of `vcfleet run`: settings are given as ++key=value; did you mean `++limit=2`?"],
      [['run', '--limit', '2'], 'did you mean `++limit=2`?'],
      [['runs', '--limt', '5'], "unknown option '--limt' of `vcfleet runs`: did you mean `--limit`?"],
      [['status', '--run-id', 'x', '--verbose'], `its options: --run-id, --config, --json (\`${CLI} status --help\``],
      [['rnu'], 'Did you mean run?'],
    ];
    for (const [args, said] of cases) {
      const r = await runCli(args);
      expect(r.code, `${args.join(' ')}: ${r.output}`).toBe(2);
      expect(r.output).toContain(said);
    }
  }, 120_000);

  it('--help of run, demo and serve lists ++key=value and the environment variables', async () => {
    for (const command of ['run', 'demo', 'serve']) {
      const r = await runCli([command, '--help']);
      expect(r.code, r.output).toBe(0);
      for (const word of ['++key=value', 'POLICY_BASE_URL', 'POLICY_MODEL', 'POLICY_API_KEY', 'OPENAI_API_KEY', 'BABYVISION_PARQUET', 'REDIS_URL']) {
        expect(r.stdout, `${command} --help`).toContain(word);
      }
    }
  }, 60_000);

  it('vcfleet --version prints the package version', async () => {
    const r = await runCli(['--version']);
    expect(r.code, r.output).toBe(0);
    expect(r.stdout.trim()).toBe(version);
  }, 30_000);
});

describe('text settings take number-like values', () => {
  it('++policy.weight_version=120 and ++policy_model_name=123 are text, as typed', () => {
    const c = loadConfig({ overrides: ['++policy.weight_version=120', '++policy_model_name=007', '++limit=2'], env: {} });
    expect(c.policy.weight_version).toBe('120');
    expect(c.policy_model_name).toBe('007');
    expect(c.limit).toBe(2);
  });

  it('a number setting still refuses text, naming the key', () => {
    expect(() => loadConfig({ overrides: ['++limit=two'], env: {} })).toThrow(/config key "limit"/);
  });
});
