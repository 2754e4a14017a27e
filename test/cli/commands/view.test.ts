/**
 * `vcfleet view`: which file it picks when none is named, the error when there is none, the access
 * rules of its server (the dashboard's), and the real command started and stopped with Ctrl-C.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pickFile } from '../../../src/cli/commands/view.ts';
import { ConfigError, DataError } from '../../../src/shared/errors.ts';
import { createFileSource } from '../../../src/viewer/file-source.ts';
import { newestJsonl } from '../../../src/viewer/newest-output.ts';
import { startViewerServer, type ViewerServer } from '../../../src/viewer/server.ts';
import { createTmpDir, removeTmpDirs } from '../../helpers/tmp.ts';
import { statusWithHost } from '../../helpers/http.ts';
import { writeViewerFixture } from '../../helpers/viewer-fixture.ts';
import { waitFor } from '../../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const NO_CREDENTIALS = { user: null, password: null, token: null };
const servers: ViewerServer[] = [];

afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  removeTmpDirs();
});

function touch(file: string, secondsAgo: number): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, '');
  const t = Date.now() / 1000 - secondsAgo;
  utimesSync(file, t, t);
}

describe('picking the file', () => {
  it('takes the newest *.jsonl under results/, in subfolders too, never one in a transcripts folder', () => {
    const results = path.join(createTmpDir(), 'results');
    touch(path.join(results, 'old.jsonl'), 300);
    touch(path.join(results, 'sweep', 'newer.jsonl'), 100);
    touch(path.join(results, 'sweep', 'newer_transcripts', 'not-a-run.jsonl'), 1);
    touch(path.join(results, 'newest.json'), 1);
    expect(newestJsonl(results)).toBe(path.join(results, 'sweep', 'newer.jsonl'));
    const notes: string[] = [];
    expect(pickFile(undefined, results, (line) => notes.push(line))).toBe(path.join(results, 'sweep', 'newer.jsonl'));
    expect(notes).toEqual([`viewing ${path.join(results, 'sweep', 'newer.jsonl')} (the newest *.jsonl under ${results}/; pass a file to choose another)\n`]);
    expect(pickFile(path.join(results, 'old.jsonl'), results)).toBe(path.join(results, 'old.jsonl'));
  });

  it('says where it looked and what to pass when there is no file', () => {
    const empty = path.join(createTmpDir(), 'results');
    expect(() => pickFile(undefined, empty)).toThrow(DataError);
    expect(() => pickFile(undefined, empty)).toThrow(`no *.jsonl under ${empty}: pass the output file of a run, e.g. vcfleet view results/babyvision_opencode.jsonl`);
    expect(() => pickFile(path.join(empty, 'x.jsonl'), empty)).toThrow(/no file .*x\.jsonl: pass the output JSONL of a run/);
  });
});

describe('the viewer server', () => {
  it('refuses to serve beyond loopback without credentials, and asks for them when set', async () => {
    const source = createFileSource(writeViewerFixture(createTmpDir(), [{ runId: 'r', rollouts: [{ task_id: '1', type: 'A', subtype: 'a', outcome: 'correct' }] }]).jsonl);
    await expect(startViewerServer(source, { host: '0.0.0.0', port: 0, credentials: NO_CREDENTIALS })).rejects.toThrow(ConfigError);
    const token = 'viewer-test-token';
    const guarded = await startViewerServer(source, { host: '0.0.0.0', port: 0, credentials: { ...NO_CREDENTIALS, token } });
    servers.push(guarded);
    const guardedUrl = `http://127.0.0.1:${guarded.port}/api/runs`;
    expect((await fetch(guardedUrl)).status).toBe(401);
    expect((await fetch(guardedUrl, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

    const open = await startViewerServer(source, { host: '127.0.0.1', port: 0, credentials: NO_CREDENTIALS, basePath: '/v' });
    servers.push(open);
    expect(open.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v\/$/);
    expect((await fetch(`${open.url}api/runs`)).status).toBe(200);
    // A web page elsewhere cannot reach it through DNS rebinding, and nothing can write.
    expect(await statusWithHost(`${open.url}api/runs`, 'attacker.example')).toBe(403);
    expect(await statusWithHost(`${open.url}api/runs`, `localhost:${open.port}`)).toBe(200);
    expect((await fetch(`${open.url}api/runs`, { method: 'POST' })).status).toBe(403);
  });
});

function runCli(args: string[], cwd: string) {
  const env = { ...process.env };
  for (const key of ['VCFLEET_DASHBOARD_USER', 'VCFLEET_DASHBOARD_PASSWORD', 'VCFLEET_DASHBOARD_TOKEN']) delete env[key];
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/vcfleet.js'), 'view', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

describe('vcfleet view', () => {
  it('serves the newest output file under results/, prints its URL, and stops on Ctrl-C', async () => {
    const cwd = createTmpDir();
    const f = writeViewerFixture(path.join(cwd, 'results'), [{ runId: 'cli-run', rollouts: [{ task_id: '1', type: 'A', subtype: 'a', outcome: 'correct' }] }], { stem: 'babyvision' });
    const cli = runCli(['--port', '0'], cwd);
    const url = await waitFor('the viewer\'s URL', () => /viewer: (\S+)/.exec(cli.out())?.[1], 30_000, 50).catch(() => undefined);
    expect(url, cli.err()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/runs\/cli-run$/);
    expect(cli.err()).toContain(`viewing ${path.join('results', path.basename(f.jsonl))} (the newest *.jsonl under results/`);
    const api = await (await fetch(url!.replace('/runs/', '/api/runs/'))).json();
    expect(api.metrics.num_rollouts).toBe(1);
    cli.child.kill('SIGINT');
    expect(await cli.exited).toBe(0);
  });

  it('serves two files together and prints the compare page of the first run against the second', async () => {
    const cwd = createTmpDir();
    const rollouts = (outcome: 'correct' | 'wrong') => [{ task_id: '1', type: 'A', subtype: 'a', outcome }, { task_id: '2', type: 'A', subtype: 'a', outcome: 'correct' as const }];
    const a = writeViewerFixture(path.join(cwd, 'results'), [{ runId: 'run-a', rollouts: rollouts('wrong') }], { stem: 'a' });
    const b = writeViewerFixture(path.join(cwd, 'results'), [{ runId: 'run-b', rollouts: rollouts('correct') }], { stem: 'b' });
    const cli = runCli([a.jsonl, b.jsonl, '--port', '0'], cwd);
    const url = await waitFor('the viewer\'s URL', () => /viewer: (\S+)/.exec(cli.out())?.[1], 30_000, 50).catch(() => undefined);
    expect(url, cli.err()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/compare\?a=run-a&b=run-b$/);
    expect(cli.out()).toContain(`(2 runs in ${a.jsonl} ${b.jsonl}; Ctrl-C stops)`);
    const api = await (await fetch(url!.replace('/compare?', '/api/compare?'))).json();
    expect([api.a.run_id, api.b.run_id, api.a.origin, api.b.origin]).toEqual(['run-a', 'run-b', a.jsonl, b.jsonl]);
    expect([api.comparison.pairs, api.comparison.a_wrong_b_right, api.comparison.a_right_b_wrong]).toEqual([2, 1, 0]);
    cli.child.kill('SIGINT');
    expect(await cli.exited).toBe(0);
  });

  it('exits 2 naming what to pass when there is nothing to view', async () => {
    const cli = runCli([], createTmpDir());
    expect(await cli.exited).toBe(2);
    expect(cli.err()).toMatch(/vcfleet: no \*\.jsonl under .*results: pass the output file of a run/);
  });
});
