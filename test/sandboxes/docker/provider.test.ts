/**
 * The pure parts of the `docker` provider, without an engine (test/containers runs it on the real
 * one): the seccomp profile it ships, the disk split, the limit watcher's output parsed strictly,
 * and its registration.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/shared/config/load.ts';
import { createLogger } from '../../../src/shared/logger.ts';
import { diskSplit, IMAGE_OPENCODE } from '../../../src/sandboxes/docker/container-config.ts';
import { parseLimitReading } from '../../../src/sandboxes/docker/limits.ts';
import { createSandboxProvider } from '../../../src/sandboxes/index.ts';
import { dockerSandboxSeccompProfile, SECCOMP_PYTHON } from '../../../src/sandboxes/box/seccomp-filter.ts';

const PROFILE = new URL('../../../src/sandboxes/docker/sandbox-seccomp.json', import.meta.url);

describe('the docker provider, its pure parts', () => {
  it('ships the local sandboxes\' filter as a Docker profile, as seccomp-filter.py generates it: namespaces, mounts and ptrace refused', async (ctx) => {
    const file = JSON.parse(readFileSync(PROFILE, 'utf8'));
    if (!existsSync(SECCOMP_PYTHON)) ctx.skip(`${SECCOMP_PYTHON} is missing`);
    expect(file).toEqual(await dockerSandboxSeccompProfile());
    const plain = file.syscalls.filter((s: { args?: unknown }) => !s.args).flatMap((s: { names: string[] }) => s.names);
    for (const denied of ['mount', 'umount2', 'pivot_root', 'unshare', 'setns', 'chroot', 'ptrace', 'bpf', 'pidfd_getfd', 'io_uring_setup', 'keyctl', 'clone3']) expect(plain).toContain(denied);
    // clone with CLONE_NEWUSER (and every other namespace flag) refused by argument.
    const clone = file.syscalls.filter((s: { names: string[] }) => s.names[0] === 'clone').map((s: { args: Array<{ value: number }> }) => s.args[0]!.value);
    expect(clone).toContain(0x10000000);
    expect(clone).toHaveLength(7);
  });

  it('splits disk_mib over the workdir, /tmp and /dev/shm so that they add up to it', () => {
    for (const mib of [3, 32, 1024, 8192]) {
      const d = diskSplit(mib);
      expect(d.workdir + d.tmp + d.shm).toBe(mib);
      expect(Math.min(d.workdir, d.tmp, d.shm)).toBeGreaterThanOrEqual(1);
    }
    expect(diskSplit(8192)).toEqual({ workdir: 6080, tmp: 2048, shm: 64 });
  });

  it('parses the limit watcher\'s line strictly', () => {
    expect(parseLimitReading('{"oom_kills": 2, "pids_max": 0, "full": true}')).toEqual({ oomKills: 2, pidsMax: 0, diskFull: true });
    expect(parseLimitReading('{"oom_kills": "9", "pids_max": 1.5, "full": false}')).toEqual({ oomKills: -1, pidsMax: -1, diskFull: false });
    expect(() => parseLimitReading('{"oom_kills": 1}')).toThrow(/no reading/);
    expect(() => parseLimitReading('not json')).toThrow();
    expect(() => parseLimitReading(`{"full": true, "x": "${'y'.repeat(5000)}"}`)).toThrow(/too much/);
  });

  it('is what sandbox_provider: docker names, running the image\'s OpenCode, and a typo is answered with the nearest name', () => {
    const logger = createLogger({ level: 'silent' });
    const p = createSandboxProvider(loadConfig({ env: {}, overrides: ['++sandbox_provider=docker', '++sandbox_config.docker_socket=/nonexistent/docker.sock'] }), { logger });
    expect(p.name).toBe('docker');
    expect(p.capabilities.agentBinary(loadConfig({ env: {} }))).toBe(IMAGE_OPENCODE);
    expect(() => createSandboxProvider(loadConfig({ env: {}, overrides: ['++sandbox_provider=dockr'] }), { logger })).toThrow(/unknown sandbox_provider "dockr" \(did you mean "docker"\?\): use one of local, opensandbox, docker/);
  });

  it('an engine that does not answer is reported as such by probe, naming the socket', async () => {
    const logger = createLogger({ level: 'silent' });
    const p = createSandboxProvider(loadConfig({ env: {}, overrides: ['++sandbox_provider=docker', '++sandbox_config.docker_socket=/nonexistent/docker.sock'] }), { logger });
    const report = await p.probe();
    expect(report.memory).toEqual({ enforced: false, detail: expect.stringMatching(/^the Docker engine at \/nonexistent\/docker\.sock does not answer: /) });
    await expect(p.create({ label: 'x', gateway: { port: 1 } })).rejects.toThrow(/does not answer .*start dockerd, or set sandbox_config\.docker_socket/);
  });
});
