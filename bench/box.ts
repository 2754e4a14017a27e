/**
 * Benchmark 6, the cost of the box: one sandbox's start as the worker pays it per rollout (create,
 * a first trivial command, destroy) with the limits (cgroup, tmpfs disk, seccomp, rlimits entry)
 * against the same `local` provider without them, alternating sides after one untimed warm-up of
 * each; medians. The one-time check at worker start (probe) is reported apart.
 *
 * Beside `local`, the `docker` provider (containers of the sandbox image `--docker-image` on this
 * host's engine, with every limit): its sandbox start against the boxed `local` one, alternating, and
 * the session start of the whole harness (rollout start -> first policy call, real OpenCode) in
 * each, alternating. Reported as not measured, saying why, where no engine or image is there.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { unenforced } from '../src/sandboxes/box-report.ts';
import { DEFAULT_RESOURCES, LocalBwrapProvider } from '../src/sandboxes/local/provider.ts';
import { DockerProvider } from '../src/sandboxes/docker/provider.ts';
import type { SandboxProvider } from '../src/sandboxes/types.ts';
import Docker from 'dockerode';
import { startScriptedPolicyServer } from '../src/demo/scripted-policy-server.ts';
import { scripts } from '../src/demo/scripted-policy-scripts.ts';
import { firstCallAt, harnessRun, MODEL } from './lib/opencode-session.ts';
import type { BenchRow } from './lib/report.ts';
import { fmt, median } from './lib/stats.ts';

export interface BoxBenchOptions {
  dir: string;
  /** Timed sandbox starts of each side. Default 15. */
  runs: number;
  /** The sandbox image of the `docker` side. */
  dockerImage: string;
  /** Harness rollouts of each side for the session start, docker vs local. Default 3. */
  sessionRuns: number;
  log?: (line: string) => void;
}

/** Milliseconds of create + `true` + destroy. */
async function sandboxStart(provider: SandboxProvider, n: number): Promise<number> {
  const t = performance.now();
  const sb = await provider.create({ label: `bench-box-${n}`, gateway: { port: 1 } });
  const r = await sb.exec(['true']);
  await sb.destroy();
  if (r.exitCode !== 0) throw new Error(`the first command of sandbox ${n} failed: ${r.stderr}`);
  return performance.now() - t;
}

export async function benchBox(opts: BoxBenchOptions): Promise<BenchRow[]> {
  const log = opts.log ?? (() => {});
  // A root worker's sandboxes run as another uid, which must pass through these folders.
  chmodSync(opts.dir, 0o711);
  const dir = mkdtempSync(path.join(opts.dir, 'box-'));
  chmodSync(dir, 0o711);
  const boxed = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(dir, 'boxed'), resources: DEFAULT_RESOURCES });
  const bare = new LocalBwrapProvider({ workdir: '/workspace', rootDir: path.join(dir, 'bare'), box: false });
  try {
    const t = performance.now();
    const report = await boxed.probe();
    const probeMs = performance.now() - t;
    const missing = unenforced(report);
    await sandboxStart(boxed, 0);
    await sandboxStart(bare, 0);
    const [withBox, without]: [number[], number[]] = [[], []];
    for (let n = 1; n <= opts.runs; n++) {
      // Alternate which side goes first, so neither always runs on a warmer machine.
      if (n % 2) withBox.push(await sandboxStart(boxed, n)), without.push(await sandboxStart(bare, n));
      else without.push(await sandboxStart(bare, n)), withBox.push(await sandboxStart(boxed, n));
    }
    const [mb, mw] = [median(withBox), median(without)];
    log(`  sandbox start: with the box ${fmt(mb, 1)} ms, without ${fmt(mw, 1)} ms (medians of ${opts.runs})`);
    const dockerRows = await dockerSide(opts, boxed, mb, dir, log);
    return [...dockerRows, {
      bench: '6 box', metric: 'sandbox start with limits / without (create + `true` + destroy)', value: fmt(mb / mw),
      note: `medians of ${opts.runs} each: ${fmt(mb, 1)} ms vs ${fmt(mw, 1)} ms; one-time check at worker start ${fmt(probeMs, 0)} ms; ` +
        (missing.length ? `NOT enforced here: ${missing.map((m) => m.split(' ')[0]).join(', ')}` : 'cgroup, tmpfs disk, seccomp and rlimits all enforced'),
    }];
  } finally {
    await boxed.close();
    await bare.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Why the docker side cannot be measured here, or null. */
async function dockerMissing(image: string): Promise<string | null> {
  const docker = new Docker();
  if (await docker.ping().then(() => false, () => true)) return `no Docker engine answers at ${process.env.DOCKER_HOST ?? '/var/run/docker.sock'}`;
  if (await docker.getImage(image).inspect().then(() => false, () => true)) return `the image ${image} is not in the engine (.ci/containers --keep-images builds it; --docker-image names another)`;
  return null;
}

/** The `docker` provider beside the boxed `local` one: sandbox start, and the harness's session start. */
async function dockerSide(opts: BoxBenchOptions, local: LocalBwrapProvider, localMs: number, dir: string, log: (l: string) => void): Promise<BenchRow[]> {
  const missing = await dockerMissing(opts.dockerImage);
  if (missing) {
    log(`  docker: not measured (${missing})`);
    return [{ bench: '6 box', metric: 'docker sandbox start / local with limits', value: 'n/a', note: `not measured: ${missing}` }];
  }
  const docker = new DockerProvider({ image: opts.dockerImage, workdir: '/workspace', resources: DEFAULT_RESOURCES });
  const server = await startScriptedPolicyServer({ script: scripts.answer('\\boxed{A}'), modelName: MODEL });
  try {
    await sandboxStart(docker, 0);
    const [d, l]: [number[], number[]] = [[], []];
    for (let n = 1; n <= opts.runs; n++) {
      if (n % 2) d.push(await sandboxStart(docker, n)), l.push(await sandboxStart(local, n));
      else l.push(await sandboxStart(local, n)), d.push(await sandboxStart(docker, n));
    }
    const [md, ml] = [median(d), median(l)];
    log(`  sandbox start: docker ${fmt(md, 1)} ms, local with the box ${fmt(ml, 1)} ms (medians of ${opts.runs}; local's own series above: ${fmt(localMs, 1)} ms)`);
    const overrides = { docker: ['++sandbox_provider=docker', `++sandbox_config.image=${opts.dockerImage}`], local: [] as string[] };
    const session = async (side: 'docker' | 'local', n: number): Promise<{ total: number; up: number }> => {
      const h = await harnessRun(server, dir, `bench-box-session-${side}-${n}`, { overrides: overrides[side] });
      return { total: (firstCallAt(server, h.startedAt) - h.startedAt) / 1000, up: h.phases['sandbox up'] ?? 0 };
    };
    await session('docker', 0);
    const sd: Array<{ total: number; up: number }> = [];
    const sl: Array<{ total: number; up: number }> = [];
    for (let n = 1; n <= opts.sessionRuns; n++) {
      if (n % 2) sd.push(await session('docker', n)), sl.push(await session('local', n));
      else sl.push(await session('local', n)), sd.push(await session('docker', n));
    }
    const [td, tl] = [median(sd.map((x) => x.total)), median(sl.map((x) => x.total))];
    log(`  session start (rollout start -> first call): docker ${fmt(td)} s, local ${fmt(tl)} s (medians of ${opts.sessionRuns})`);
    return [
      {
        bench: '6 box', metric: 'docker sandbox start / local with limits (create + `true` + destroy)', value: fmt(md / ml),
        note: `medians of ${opts.runs} each, alternating: ${fmt(md, 1)} ms vs ${fmt(ml, 1)} ms; ${opts.dockerImage}, every limit enforced on both sides`,
      },
      {
        bench: '6 box', metric: 'session start, docker / local (harness rollout start -> first policy call, real OpenCode)', value: fmt(td / tl),
        note: `medians of ${opts.sessionRuns} each, alternating: ${fmt(td)} s vs ${fmt(tl)} s; of which sandbox up ${fmt(median(sd.map((x) => x.up)))} s vs ${fmt(median(sl.map((x) => x.up)))} s`,
      },
    ];
  } finally {
    await server.close();
    await docker.close();
  }
}
