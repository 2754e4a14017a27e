/**
 * The `opensandbox` provider through the official SDK against a scripted OpenSandbox server: what it
 * sends (auth, image, TTL, limits, egress policy, env, owner labels), commands and files, timeout and
 * abort, and a DELETE of the sandbox on every path.
 */
import os from 'node:os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../../src/shared/config/load.ts';
import { ConfigError, InfraError } from '../../../src/shared/errors.ts';
import { createLogger } from '../../../src/shared/logger.ts';
import { createSandboxProvider } from '../../../src/sandboxes/index.ts';
import { OpenSandboxProvider, type OpenSandboxOptions } from '../../../src/sandboxes/opensandbox/provider.ts';
import { identityOf } from '../../../src/sandboxes/proc-tree.ts';
import { SANDBOX_PATH } from '../../../src/agent/session-config.ts';
import { startFakeOpenSandbox, type FakeOpenSandbox } from '../../helpers/fake-opensandbox-server.ts';
import { processesWith } from '../../helpers/processes.ts';
import { waitFor } from '../../helpers/wait.ts';

const API_KEY = 'test-opensandbox-key';
const GATEWAY = { url: 'http://gw.example.internal:43117', port: 43117 };

let fake: FakeOpenSandbox;

function provider(extra: Partial<OpenSandboxOptions> = {}): OpenSandboxProvider {
  return new OpenSandboxProvider({
    domain: fake.domain,
    apiKey: API_KEY,
    image: 'registry.example/vcfleet-sandbox:1',
    ttlS: 7200,
    resources: { cpu: 2, memory_mib: 8192 },
    workdir: '/workspace',
    readyTimeoutS: 2,
    ...extra,
  });
}

function deletes(id: string): number {
  return fake.requests.filter((r) => r.method === 'DELETE' && r.path === `/v1/sandboxes/${id}`).length;
}

beforeEach(async () => {
  fake = await startFakeOpenSandbox({ apiKey: API_KEY });
});

afterEach(async () => {
  await fake.close();
});

describe('opensandbox provider', () => {
  it('creates the sandbox as configured, runs commands, moves files, and deletes it', async () => {
    const p = provider();
    const sb = await p.create({ label: 'run1/task-7#0', gateway: GATEWAY, env: { OPENCODE_X: '1' } });
    expect(sb.gatewayUrl).toBe(GATEWAY.url);
    const create = fake.requests.find((r) => r.method === 'POST' && r.path === '/v1/sandboxes')!.body as Record<string, unknown>;
    expect(create).toMatchObject({
      image: { uri: 'registry.example/vcfleet-sandbox:1' },
      timeout: 7200,
      resourceLimits: { cpu: '2', memory: '8192Mi' },
      env: { OPENCODE_X: '1' },
      networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'gw.example.internal' }] },
      metadata: {
        'vcfleet-fleet': 'visual-coding-fleet',
        'vcfleet-host': os.hostname(),
        'vcfleet-owner-pid': String(process.pid),
        'vcfleet-label': 'run1-task-7-0',
      },
    });
    expect((create.networkPolicy as { egress: unknown[] }).egress).toHaveLength(1);

    await sb.putFile('/workspace/in.txt', Buffer.from('hello file\n'));
    const lines: string[] = [];
    const r = await sb.exec(['sh', '-c', 'cat in.txt; echo "$OPENCODE_X $EXTRA"; cat; echo oops >&2; exit 4'], {
      env: { EXTRA: "it's quoted" },
      stdin: 'from stdin\n',
      onStdoutLine: (l) => lines.push(l),
    });
    expect(r).toMatchObject({ exitCode: 4, timedOut: false, aborted: false, stderr: 'oops\n' });
    expect(lines).toEqual(['hello file', "1 it's quoted", 'from stdin']);
    expect(r.stdout).toBe('hello file\n1 it\'s quoted\nfrom stdin\n');
    expect((await sb.exec(['sh', '-c', 'echo made > out.txt'])).exitCode).toBe(0);
    expect((await sb.getFile('out.txt')).toString()).toBe('made\n');

    await sb.destroy();
    await sb.destroy();
    expect(deletes(sb.id)).toBe(1);
    expect(fake.sandboxes.get(sb.id)!.deleted).toBe(true);
    // Every request, lifecycle and execd alike, carried the API key.
    expect(fake.requests.every((q) => q.headers['open-sandbox-api-key'] === API_KEY)).toBe(true);
  });

  it('on timeout and on abort, stops the command and interrupts it; destroy deletes the sandbox', async () => {
    const sb = await provider().create({ label: 't', gateway: GATEWAY });
    const marker = `sleep ${940000 + (process.pid % 1000)}5`;
    const timed = await sb.exec(['sh', '-c', `setsid ${marker} & ${marker}`], { timeoutMs: 400 });
    expect(timed).toMatchObject({ timedOut: true, aborted: false });
    const ac = new AbortController();
    const aborted = await sb.exec(['sh', '-c', `echo up; ${marker}`], { signal: ac.signal, onStdoutLine: () => ac.abort() });
    expect(aborted).toMatchObject({ aborted: true, timedOut: false, stdout: 'up\n' });
    await waitFor('the interrupt of the aborted command', () => fake.requests.some((q) => q.method === 'DELETE' && q.path.endsWith('/command')), 10_000, 50);
    await sb.destroy();
    expect(deletes(sb.id)).toBe(1);
    expect(processesWith(marker)).toEqual([]);
  });

  it('returns at the grace even when the interrupt does not end the command', async () => {
    fake.options.ignoreInterrupt = true;
    const sb = await provider({ killGraceMs: 300 }).create({ label: 'g', gateway: GATEWAY });
    // The command would run 30 s: returning at all means at the grace (how soon: benchmark 9).
    const r = await sb.exec(['sleep', '30'], { timeoutMs: 300 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null });
    await sb.destroy();
    expect(deletes(sb.id)).toBe(1);
  });

  it('destroy during a running command aborts it and deletes the sandbox', async () => {
    const sb = await provider().create({ label: 'd', gateway: GATEWAY });
    const running = sb.exec(['sleep', '30']);
    await waitFor('the command to start', () => fake.requests.some((q) => q.method === 'POST' && q.path.endsWith('/command')), 10_000, 50);
    await sb.destroy();
    expect((await running).aborted).toBe(true);
    expect(deletes(sb.id)).toBe(1);
    await expect(sb.exec(['true'])).rejects.toThrow(/destroyed/);
  });

  it('a sandbox that never becomes ready is deleted and creation fails with InfraError', async () => {
    fake.options.failPing = true;
    const err = await provider({ readyTimeoutS: 1 }).create({ label: 'x', gateway: GATEWAY }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfraError);
    expect(fake.sandboxes.size).toBe(1);
    expect(deletes('sbx-1')).toBe(1);
  });

  it('a failed create request is an InfraError; a missing or wrong API key a ConfigError naming the setting', async () => {
    fake.options.failCreate = true;
    await expect(provider().create({ label: 'x', gateway: GATEWAY })).rejects.toBeInstanceOf(InfraError);
    fake.options.failCreate = false;
    const wrong = await provider({ apiKey: 'wrong' }).create({ label: 'x', gateway: GATEWAY }).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(ConfigError);
    expect((wrong as Error).message).toMatch(/refuses this worker's API key \(INVALID_API_KEY: Invalid API key\.\): set sandbox_config\.api_key \(OPENSANDBOX_API_KEY\)/);
    await expect(provider({ apiKey: null }).create({ label: 'x', gateway: GATEWAY })).rejects.toThrow(/\(MISSING_API_KEY: /);
    expect(fake.sandboxes.size).toBe(0);
  });

  it('a server without an egress image refuses model_only (400 SANDBOX::INVALID_PARAMETER): a ConfigError saying how to configure it', async () => {
    fake.options.egressImage = false;
    const err = await provider().create({ label: 'x', gateway: GATEWAY }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('refuses the model_only network policy (SANDBOX::INVALID_PARAMETER: Network policy requires egress.image');
    expect((err as Error).message).toContain('`[egress] image = "opensandbox/egress:<version>"` in ~/.sandbox.toml');
    expect(fake.sandboxes.size).toBe(0);
  });

  it('an image the server cannot pull is an InfraError naming it; a TTL under 60 s is refused by validation (422 detail) and by the config', async () => {
    fake.options.unpullable = ['registry.example/vcfleet-sandbox:1'];
    await expect(provider().create({ label: 'x', gateway: GATEWAY })).rejects.toThrow(/cannot pull the sandbox image registry\.example\/vcfleet-sandbox:1 \(DOCKER::SANDBOX_IMAGE_PULL_FAILED: Failed to pull/);
    fake.options.unpullable = [];
    const short = await provider({ ttlS: 30 }).create({ label: 'x', gateway: GATEWAY }).catch((e: unknown) => e);
    expect(short).toBeInstanceOf(ConfigError);
    expect((short as Error).message).toContain('refused the sandbox\'s settings: the server refused the request (422): timeout: Input should be greater than or equal to 60');
    expect(() => ConfigSchema.parse({ sandbox_config: { ttl_s: 30 } })).toThrow(/at least 60 \(an OpenSandbox server refuses a shorter sandbox TTL\)/);
    expect(fake.sandboxes.size).toBe(0);
  });

  it('a create answers 202 with the sandbox already Running; a second delete is DOCKER::SANDBOX_NOT_FOUND, and destroy takes it as deleted', async () => {
    const sb = await provider().create({ label: 'x', gateway: GATEWAY });
    // As the real server: the create's own answer (which the SDK then polls past) says Running.
    const direct = await fetch(`http://${fake.domain}/v1/sandboxes`, { method: 'POST', headers: { 'OPEN-SANDBOX-API-KEY': API_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ image: { uri: 'img:1' }, entrypoint: ['tail', '-f', '/dev/null'], timeout: 60 }) });
    expect([direct.status, ((await direct.json()) as { status: { state: string } }).status.state]).toEqual([202, 'Running']);
    const again = await fetch(`http://${fake.domain}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: { 'OPEN-SANDBOX-API-KEY': API_KEY } });
    expect(again.status).toBe(204);
    const second = await fetch(`http://${fake.domain}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: { 'OPEN-SANDBOX-API-KEY': API_KEY } });
    expect([second.status, await second.json()]).toEqual([404, { code: 'DOCKER::SANDBOX_NOT_FOUND', message: `Sandbox ${sb.id} not found.` }]);
    await sb.destroy();
    expect(deletes(sb.id)).toBe(3);
  });

  it('use_server_proxy reaches a sandbox whose host ports the worker cannot reach', async () => {
    fake.options.hostPortsUnreachable = true;
    await expect(provider({ readyTimeoutS: 1 }).create({ label: 'x', gateway: GATEWAY })).rejects.toBeInstanceOf(InfraError);
    const sb = await provider({ useServerProxy: true }).create({ label: 'y', gateway: GATEWAY });
    expect((await sb.exec(['echo', 'through the proxy'])).stdout).toBe('through the proxy\n');
    const asked = fake.requests.filter((r) => r.path.startsWith(`/v1/sandboxes/${sb.id}/endpoints/`));
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((r) => r.query.get('use_server_proxy') === 'true')).toBe(true);
    await sb.destroy();
    expect(ConfigSchema.parse({ sandbox_config: { use_server_proxy: true } }).sandbox_config.use_server_proxy).toBe(true);
  });

  it('an abort while creating deletes the new sandbox', async () => {
    const ac = new AbortController();
    const creating = provider().create({ label: 'x', gateway: GATEWAY }, ac.signal);
    setTimeout(() => ac.abort(), 5);
    await expect(creating).rejects.toThrow();
    await waitFor('every sandbox created to be deleted', () => [...fake.sandboxes.values()].every((sb) => sb.deleted), 10_000, 20);
  });

  it('close() deletes every live sandbox (worker shutdown)', async () => {
    const p = provider();
    const a = await p.create({ label: 'a', gateway: GATEWAY });
    const b = await p.create({ label: 'b', gateway: GATEWAY });
    await a.destroy();
    await p.close();
    expect(deletes(a.id)).toBe(1);
    expect(deletes(b.id)).toBe(1);
  });

  it('reapOrphans deletes only this host and fleet sandboxes whose worker is dead', async () => {
    const me = identityOf(process.pid)!;
    const base = { 'vcfleet-fleet': 'visual-coding-fleet', 'vcfleet-host': os.hostname(), 'vcfleet-boot': me.bootId };
    const dead = await fake.seed({ ...base, 'vcfleet-owner-pid': String(2 ** 22 + 5), 'vcfleet-owner-start': '1' });
    const alive = await fake.seed({ ...base, 'vcfleet-owner-pid': String(me.pid), 'vcfleet-owner-start': String(me.startTime) });
    const otherHost = await fake.seed({ ...base, 'vcfleet-host': 'elsewhere', 'vcfleet-owner-pid': '1', 'vcfleet-owner-start': '1' });
    const otherFleet = await fake.seed({ ...base, 'vcfleet-fleet': 'another', 'vcfleet-owner-pid': '1', 'vcfleet-owner-start': '1' });
    expect(await provider().reapOrphans()).toBe(1);
    expect(dead.deleted).toBe(true);
    expect([alive, otherHost, otherFleet].map((s) => s.deleted)).toEqual([false, false, false]);
  });
});

describe('OpenCode in an opensandbox sandbox', () => {
  it('runs by the path the image declares (sandbox_config.opencode_bin), with the PATH a rollout sends replacing the image\'s', async () => {
    const config = ConfigSchema.parse({ sandbox_provider: 'opensandbox', sandbox_config: { domain: fake.domain, api_key: API_KEY } });
    const p = createSandboxProvider(config, { logger: createLogger({ level: 'silent' }) });
    const sb = await p.create({ label: 'oc', gateway: GATEWAY });
    try {
      const bin = p.capabilities.agentBinary(config);
      expect(bin).toBe('/opt/opencode/bin/opencode');
      const r = await sb.exec([bin, '--version'], { env: { PATH: SANDBOX_PATH } });
      expect([r.stdout.trim(), r.exitCode], r.stderr).toEqual(['1.17.11', 0]);
      const moved = ConfigSchema.parse({ sandbox_config: { opencode_bin: '/usr/local/bin/opencode' } });
      expect(createSandboxProvider({ ...config, sandbox_config: { ...config.sandbox_config, opencode_bin: moved.sandbox_config.opencode_bin } }, { logger: createLogger({ level: 'silent' }) }).capabilities.agentBinary(config)).toBe('/usr/local/bin/opencode');
      expect(() => ConfigSchema.parse({ sandbox_config: { opencode_bin: 'opencode' } })).toThrow(/an absolute path inside the sandbox image/);
    } finally {
      await p.close();
    }
  });
});

describe('createSandboxProvider', () => {
  const logger = createLogger({ level: 'silent' });

  it('chooses by sandbox_provider and requires a domain for opensandbox', () => {
    expect(createSandboxProvider(ConfigSchema.parse({}), { logger }).name).toBe('local');
    const remote = ConfigSchema.parse({ sandbox_provider: 'opensandbox', sandbox_config: { domain: 'http://os.example:8080' } });
    expect(createSandboxProvider(remote, { logger }).name).toBe('opensandbox');
    const missing = ConfigSchema.parse({ sandbox_provider: 'opensandbox' });
    expect(() => createSandboxProvider(missing, { logger })).toThrow(ConfigError);
  });
});
