/**
 * A `local` provider with small limits for the box tests, the sandboxes it made during a test, and
 * the checks around them: skip where the host cannot enforce the box, and after each test, nothing
 * of any sandbox left on the host (no mount, no folder, no cgroup).
 */
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { expect, type TestContext } from 'vitest';
import { unenforced } from '../../src/sandboxes/box-report.ts';
import { detectCgroupLayout } from '../../src/sandboxes/local/cgroup-layout.ts';
import { LocalBwrapProvider, type LocalBwrapOptions } from '../../src/sandboxes/local/provider.ts';
import { cgroupName } from '../../src/sandboxes/local/sandbox-cgroup.ts';
import type { BoxReport, Sandbox, SandboxResources } from '../../src/sandboxes/types.ts';
import { passableTmpDir } from './tmp.ts';

export const BOX_LIMITS: SandboxResources = { cpu: 1, memory_mib: 128, pids: 64, disk_mib: 32 };

export interface BoxTestEnv {
  provider: LocalBwrapProvider;
  report: BoxReport;
  /** Another provider under the same root (closed by `cleanUp`). */
  providerWith(opts: Partial<LocalBwrapOptions>): LocalBwrapProvider;
  sandboxOf(p?: LocalBwrapProvider): Promise<Sandbox>;
  /** Skips on a host where the box cannot be enforced (not root, no writable cgroup, no seccomp bindings). */
  needsBox(ctx: TestContext): void;
  /** Destroys this test's sandboxes, then checks nothing of them is left on the host. */
  cleanUp(): Promise<void>;
  close(): Promise<void>;
}

/** This process's sandbox cgroup folders that still exist. */
async function leftoverCgroups(): Promise<string[]> {
  const layout = await detectCgroupLayout();
  const parents = new Set(Object.values(layout.places).map((p) => p.parent));
  const prefix = `vcfleet-${process.pid}-`;
  return [...parents].flatMap((p) => readdirSync(p).filter((n) => n.startsWith(prefix)).map((n) => path.join(p, n)));
}

/** The content of a control file of the sandbox's cgroup. */
export async function cgroupFile(sb: Sandbox, controller: 'cpu' | 'memory' | 'pids', file: string): Promise<string> {
  const place = (await detectCgroupLayout()).places[controller]!;
  return readFileSync(path.join(place.parent, cgroupName(sb.id), file), 'utf8');
}

export async function boxTestEnv(): Promise<BoxTestEnv> {
  const root = passableTmpDir('vcfleet-box-test-');
  const sandboxes = path.join(root, 'sandboxes');
  const base: LocalBwrapOptions = { workdir: '/workspace', rootDir: sandboxes, resources: BOX_LIMITS, killGraceMs: 500, diskPollMs: 100 };
  const provider = new LocalBwrapProvider(base);
  const report = await provider.probe();
  const created: Sandbox[] = [];
  const extra: LocalBwrapProvider[] = [];
  return {
    provider,
    report,
    providerWith(opts) {
      const p = new LocalBwrapProvider({ ...base, ...opts });
      extra.push(p);
      return p;
    },
    async sandboxOf(p = provider) {
      const sb = await p.create({ label: 'box', gateway: { port: 18932 } });
      created.push(sb);
      return sb;
    },
    needsBox(ctx) {
      if (process.getuid?.() !== 0) ctx.skip('needs root: cgroups and tmpfs mounts');
      const missing = unenforced(report);
      if (missing.length > 0) ctx.skip(`this host cannot enforce: ${missing.join('; ')}`);
    },
    async cleanUp() {
      await Promise.all(created.splice(0).map((s) => s.destroy()));
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(root);
      expect(existsSync(sandboxes) ? readdirSync(sandboxes) : []).toEqual([]);
      expect(await leftoverCgroups()).toEqual([]);
    },
    async close() {
      await Promise.all([provider, ...extra].map((p) => p.close()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
