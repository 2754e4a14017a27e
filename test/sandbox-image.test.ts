/** The sandbox image stays in step with what the tests run (.ci/containers builds it and runs its checks). */
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const dockerfile = readFileSync(new URL('../sandbox_image/Dockerfile', import.meta.url), 'utf8');
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

describe('sandbox_image/Dockerfile', () => {
  it('pins the OpenCode version the project installs, by SHA-256', () => {
    expect(pkg.optionalDependencies['opencode-linux-x64']).toBe('1.17.11');
    expect(dockerfile).toMatch(/ARG OPENCODE_VERSION=1\.17\.11\n/);
    expect(dockerfile).toMatch(/ARG OPENCODE_TGZ_SHA256=[0-9a-f]{64}\n/);
    expect(dockerfile).toMatch(/sha256sum -c -/);
    expect(dockerfile).toMatch(/FROM \$\{BASE_IMAGE\}/);
    expect(dockerfile).toMatch(/ARG BASE_IMAGE=debian:bookworm-slim@sha256:[0-9a-f]{64}/);
  });

  it('builds offline from bases named by build arguments', () => {
    expect(dockerfile).toMatch(/FROM \$\{NODE_IMAGE\} AS opencode/);
    // No `# syntax=` line: BuildKit would fetch that frontend image from a registry first.
    expect(dockerfile).not.toMatch(/^# *syntax=/m);
    // useradd is in /usr/sbin: the PATH the image sets must keep it.
    const imagePath = /ENV PATH=(\S+)/.exec(dockerfile)?.[1].split(':') ?? [];
    expect(imagePath).toContain('/usr/sbin');
    expect(dockerfile.indexOf('ENV PATH=')).toBeLessThan(dockerfile.indexOf('RUN useradd'));
  });

  // Upstream versions only: a Debian security update changes the revision, not what the agent gets.
  const upstream = (v: string) => v.replace(/^\d+:/, '').replace(/-[^-]+$/, '');
  it('pins the Python toolkit to the upstream versions the local sandboxes use here', (ctx) => {
    if (!existsSync('/usr/bin/dpkg-query')) ctx.skip('no dpkg on this host: the installed versions cannot be read');
    for (const name of ['python3-pil', 'python3-numpy', 'python3-scipy', 'python3-opencv']) {
      const pinned = new RegExp(`${name}=(\\S+)`).exec(dockerfile)?.[1];
      expect(pinned, name).toBeTruthy();
      const installed = execFileSync('dpkg-query', ['-W', '-f=${Version}', name], { encoding: 'utf8' });
      expect(upstream(pinned!), name).toBe(upstream(installed));
    }
  });
});
