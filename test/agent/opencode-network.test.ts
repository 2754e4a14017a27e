/**
 * With the session's env and seeded config dir, OpenCode connects to nothing but the gateway: run
 * on the host (where the network exists) under strace, every non-Unix `connect` must go to the
 * gateway's loopback port, with no DNS query. One more real OpenCode run, about twice as slow under
 * strace (Debian's `strace`, installed by .ci/run). Inside a `local` sandbox there is no network at
 * all; opencode-runner.test.ts checks OpenCode's own log for failed fetches there.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { opencodeBinaryPath } from '../../src/sandboxes/local/opencode-binary.ts';
import { buildOpenCodeConfig, buildOpenCodeEnv, buildRunArgv, seedFiles, sessionPaths } from '../../src/agent/session-config.ts';
import { startPolicyGateway } from '../../src/gateway/index.ts';
import { rolloutPolicy } from '../helpers/policy.ts';
import { encodePng } from '../helpers/fixture-images.ts';
import { scripts, startScriptedPolicyServer } from '../helpers/scripted-policy-server.ts';

describe('OpenCode start-up network traffic', () => {
  it('connects only to the gateway', async () => {
    expect(existsSync('/usr/bin/strace'), 'strace is needed: apt-get install strace').toBe(true);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'oc-strace-'));
    const server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}') });
    const gateway = await startPolicyGateway({
      policy: rolloutPolicy(server.url, { apiKey: 'k', model: 'vlm', settings: { max_output_tokens: 1000, max_request_mib: 64, max_calls_per_rollout: 100 } }),
      accessToken: 'tok', imageBudgetBytes: 32 << 20, tcp: { host: '127.0.0.1', port: 0 },
    });
    try {
      const work = path.join(dir, 'ws');
      mkdirSync(work);
      writeFileSync(path.join(work, 'puzzle.png'), encodePng(16, 16, () => [1, 2, 3]));
      const paths = sessionPaths(work);
      for (const f of seedFiles(paths)) {
        mkdirSync(path.dirname(f.path), { recursive: true });
        writeFileSync(f.path, f.content);
      }
      const cfg = buildOpenCodeConfig({ gatewayBaseUrl: `http://127.0.0.1:${gateway.tcpPort}/v1`, accessToken: 'tok', modelName: 'vlm', contextWindow: 10000, maxOutputTokens: 1000, requestTimeoutS: 100 });
      const argv = buildRunArgv(opencodeBinaryPath({ agent: { opencode_bin: null } } as never), 'vlm', 'net', path.join(work, 'puzzle.png'));
      const trace = path.join(dir, 'strace.txt');
      const child = spawn('/usr/bin/strace', ['-f', '-e', 'trace=connect,sendto', '-o', trace, ...argv], { cwd: work, env: buildOpenCodeEnv(paths, cfg, 1000) });
      child.stdin.end('Say hi');
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise((resolve) => child.on('exit', resolve));
      expect(code).toBe(0);
      expect(out).toContain('\\\\boxed{A}');
      const inet = readFileSync(trace, 'utf8').split('\n').filter((l) => /connect\(|sendto\(/.test(l) && /AF_INET/.test(l));
      expect(inet.length).toBeGreaterThan(0);
      for (const line of inet) expect(line).toContain(`sin_port=htons(${gateway.tcpPort}), sin_addr=inet_addr("127.0.0.1")`);
      expect(existsSync(path.join(paths.stateDir, 'home', '.npm'))).toBe(false);
    } finally {
      await gateway.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
