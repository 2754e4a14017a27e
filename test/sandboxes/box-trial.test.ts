/**
 * The trial sandbox of preflight with the `opensandbox` provider against the fake OpenSandbox server
 * (which answers as the real one): it is made the way a rollout makes it (a gateway URL it must
 * reach), so a sandbox-worker starts; an image without OpenCode or without the toolkit, and a
 * sandbox that cannot reach the gateway, stop it with one line naming the setting to change.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigSchema, type Config } from '../../src/shared/config/load.ts';
import { ConfigError } from '../../src/shared/errors.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { createAgentRunner } from '../../src/agent/index.ts';
import { startFakeOpenSandbox, type FakeOpenSandbox } from '../helpers/fake-opensandbox-server.ts';

const KEY = 'trial-key';
const IMAGE = 'visual-coding-fleet-sandbox:latest';
const logger = createLogger({ level: 'silent' });
let fake: FakeOpenSandbox;

function config(sandbox: Record<string, unknown> = {}): Config {
  return ConfigSchema.parse({
    sandbox_provider: 'opensandbox',
    sandbox_config: { domain: fake.domain, api_key: KEY, image: IMAGE, gateway_host: '127.0.0.1', ...sandbox },
  });
}

/** The error the sandbox-worker's start ends with, or null when it starts. */
async function start(c: Config): Promise<Error | null> {
  try {
    const runner = await createAgentRunner(c, logger);
    await runner.close();
    return null;
  } catch (err) {
    return err as Error;
  }
}

beforeEach(async () => {
  fake = await startFakeOpenSandbox({ apiKey: KEY });
});
afterEach(async () => {
  await fake.close();
});

describe('preflight with opensandbox', () => {
  it('makes its trial sandbox as a rollout does (model_only to a gateway it reaches), checks it and deletes it', async () => {
    expect(await start(config())).toBeNull();
    const creates = fake.requests.filter((r) => r.method === 'POST' && r.path === '/v1/sandboxes');
    expect(creates).toHaveLength(1);
    expect(creates[0]!.body).toMatchObject({ networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: '127.0.0.1' }] } });
    const ran = fake.requests.filter((r) => r.path.endsWith('/command') && r.method === 'POST').map((r) => (r.body as { command: string }).command);
    expect(ran.some((c) => c.startsWith('/opt/opencode/bin/opencode --version'))).toBe(true);
    expect([...fake.sandboxes.values()].every((s) => s.deleted)).toBe(true);
  });

  it('an image without OpenCode at sandbox_config.opencode_bin: one line naming the setting', async () => {
    fake.options.images = { [IMAGE]: { opencode: false } };
    const err = await start(config());
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/^the sandbox image visual-coding-fleet-sandbox:latest has no OpenCode at \/opt\/opencode\/bin\/opencode \(.*exit code 127.*\): set sandbox_config\.opencode_bin \(VCFLEET_SANDBOX_OPENCODE_BIN\)/);
    expect(err!.message).not.toContain('\n');
    // The same image, told where its OpenCode is not: the path it was given is named.
    fake.options.images = { [IMAGE]: {} };
    expect((await start(config({ opencode_bin: '/usr/local/bin/opencode' })))!.message).toContain('has no OpenCode at /usr/local/bin/opencode');
    expect([...fake.sandboxes.values()].every((s) => s.deleted)).toBe(true);
  });

  it('an image without the toolkit: one line naming the image setting', async () => {
    fake.options.images = { [IMAGE]: { toolkit: false } };
    const err = await start(config());
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/^the sandbox image visual-coding-fleet-sandbox:latest has no agent toolkit \(.*No module named.*\): build the image from sandbox_image\/ .* set sandbox_config\.image \(VISUAL_CODING_OPENCODE_SANDBOX_IMAGE\)/);
    expect(err!.message).not.toContain('\n');
  });

  it('a sandbox that cannot reach the gateway: one line naming gateway_host; none named: the same setting', async () => {
    // 192.0.2.1 is an address of no host (TEST-NET-1): the sandbox cannot reach the worker there.
    const err = await start(config({ gateway_host: '192.0.2.1' }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/^the trial opensandbox sandbox cannot reach the gateway at http:\/\/192\.0\.2\.1:\d+ \(.*\): set sandbox_config\.gateway_host \(VCFLEET_GATEWAY_HOST\)/);
    expect(err!.message).not.toContain('\n');
    expect((await start(config({ gateway_host: null })))!.message).toBe('sandbox_config.gateway_host (VCFLEET_GATEWAY_HOST) must name this worker as the sandboxes reach it');
    expect([...fake.sandboxes.values()].every((s) => s.deleted)).toBe(true);
  });
});
