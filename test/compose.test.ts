/**
 * docker-compose.yml and the Dockerfile agree with the CLI: the compose file parses, every command
 * a fleet service runs is a `vcfleet` subcommand (worker roles included) with options it knows, Redis
 * persists and never evicts, scaled services can be scaled, every role gets REDIS_URL, and the
 * sandbox-worker gets what the sandbox box needs (root in its container, a private writable cgroup,
 * its own limits, a seccomp profile generated from the sandbox list) without `privileged`. The
 * running check of all this is .ci/containers, which runs the file on the Docker engine.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/cli/main.ts';
import { WORKER_ROLES } from '../src/cli/commands/worker.ts';
import { SECCOMP_PYTHON, dockerSeccompProfile } from '../src/sandboxes/box/seccomp-filter.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  environment?: Record<string, string>;
  ports?: string[];
  container_name?: string;
  profiles?: string[];
  cap_add?: string[];
  security_opt?: string[];
  volumes?: string[];
  privileged?: boolean;
  user?: string;
  cgroup?: string;
  entrypoint?: string[];
  mem_limit?: string;
  memswap_limit?: string;
  pids_limit?: number | string;
  init?: boolean;
  healthcheck?: { test?: string[]; disable?: boolean };
  depends_on?: Record<string, { condition: string }>;
}

const compose = YAML.parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };
const fleetServices = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);

function argv(s: Service): string[] {
  return Array.isArray(s.command) ? s.command : (s.command ?? '').split(/\s+/).filter(Boolean);
}

function subcommand(program: Command, name: string): Command | undefined {
  return program.commands.find((c) => c.name() === name);
}

describe('docker-compose.yml', () => {
  it('runs Redis with AOF, noeviction and a volume', () => {
    const redis = compose.services.redis;
    const cmd = argv(redis).join(' ');
    expect(cmd).toContain('--appendonly yes');
    expect(cmd).toContain('--appendfsync everysec');
    expect(cmd).toContain('--maxmemory-policy noeviction');
    expect(redis.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
  });

  it('has every role of the fleet as a service of the one fleet image', () => {
    const commands = fleetServices.map(([, s]) => argv(s).slice(0, 2).join(' '));
    for (const want of ['worker sandbox', 'worker judge', 'worker results', 'dashboard --host', 'produce']) {
      expect(commands.some((c) => c.startsWith(want)), want).toBe(true);
    }
    expect(new Set(fleetServices.map(([, s]) => s.image)).size).toBe(1);
    expect(compose.services.producer.profiles).toEqual(['produce']);
  });

  it('names only commands, worker roles and options the vcfleet CLI has', () => {
    const program = buildProgram();
    for (const [name, s] of fleetServices) {
      const [cmd, ...rest] = argv(s);
      const sub = subcommand(program, cmd);
      expect(sub, `${name}: vcfleet ${cmd}`).toBeDefined();
      if (cmd === 'worker') expect(WORKER_ROLES as readonly string[], name).toContain(rest[0]);
      const known = new Set(sub!.options.map((o) => o.long));
      for (const flag of rest.filter((a) => a.startsWith('--'))) expect(known.has(flag.split('=')[0]), `${name}: ${cmd} ${flag}`).toBe(true);
    }
  });

  it('gives every role REDIS_URL with the password Redis requires, and the dashboard its credentials', () => {
    const password = '${VCFLEET_REDIS_PASSWORD:?';
    for (const [name, s] of fleetServices) expect(s.environment?.REDIS_URL, name).toMatch(/^redis:\/\/:\$\{VCFLEET_REDIS_PASSWORD:\?[^}]+\}@redis:6379$/);
    const redis = compose.services.redis;
    const command = argv(redis);
    expect(command[command.indexOf('--requirepass') + 1]).toContain(password);
    expect(redis.ports).toEqual(['${VCFLEET_REDIS_PUBLISH:-127.0.0.1}:6379:6379']); // loopback unless told
    const dash = compose.services.dashboard.environment!;
    for (const v of ['VCFLEET_DASHBOARD_USER', 'VCFLEET_DASHBOARD_PASSWORD', 'VCFLEET_DASHBOARD_TOKEN']) expect(dash).toHaveProperty(v);
    expect(compose.services['sandbox-worker'].environment).toHaveProperty('POLICY_API_KEY');
    expect(compose.services['judge-worker'].environment).toHaveProperty('OPENAI_API_KEY');
  });

  it('lets the workers scale: no container names or host ports on them', () => {
    for (const name of ['sandbox-worker', 'judge-worker']) {
      expect(compose.services[name].container_name, name).toBeUndefined();
      expect(compose.services[name].ports, name).toBeUndefined();
    }
    expect(compose.services.results.volumes?.some((v) => v.endsWith(':/app/results'))).toBe(true);
  });

  it('lets the dashboard read the transcripts the results consumer writes, and only read them', () => {
    expect(compose.services.dashboard.volumes).toContain('results:/app/results:ro');
  });

  it('has the results consumer write into its volume, which the image makes writable by `node`, and the dashboard read there', () => {
    // The working folder /app belongs to root: an output root there fails the results preflight (EACCES).
    for (const name of ['results', 'dashboard']) expect(compose.services[name].environment?.VCFLEET_OUTPUT_ROOT, name).toBe('/app/results');
    expect(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')).toMatch(/chown -R node:node \/app\/results/);
  });

  it('runs one init, the image\'s tini, and gives every long-running role a healthcheck', () => {
    for (const [name, s] of fleetServices) {
      expect(s.init, name).toBeUndefined();
      if (name === 'producer') expect(s.healthcheck?.disable, name).toBe(true);
      else expect(s.healthcheck?.test?.[0], name).toBe('CMD');
    }
    expect(compose.services.dashboard.healthcheck?.test?.join(' ')).toContain('http://127.0.0.1:3000/');
  });

  it('gives the sandbox-worker what the sandbox box needs, without privileged or an unconfined seccomp', () => {
    const sw = compose.services['sandbox-worker'];
    expect(sw.privileged ?? false).toBe(false);
    expect(sw.security_opt).not.toContain('seccomp=unconfined');
    expect(sw.security_opt).toContain('seccomp=./sandbox-worker-seccomp.json');
    expect(sw.cap_add).toEqual(['SYS_ADMIN']);
    // Root in its container for the tmpfs mounts, its own cgroup namespace made writable for the sandbox cgroups.
    expect(sw.user).toBe('root');
    expect(sw.cgroup).toBe('private');
    // remount,bind: cgroup v1's hierarchies are bind mounts of the host's, which a plain remount cannot make writable.
    expect(sw.entrypoint!.join(' ')).toMatch(/mount -o remount,bind,rw[\s\S]*exec \/usr\/bin\/tini -- node bin\/vcfleet\.js "\$\$@"/);
    // The worker itself is bounded: memory without swap, and processes.
    expect(sw.mem_limit).toMatch(/^\$\{VCFLEET_SANDBOX_WORKER_MEM:-\d+g\}$/);
    expect(sw.memswap_limit).toBe(sw.mem_limit);
    expect(String(sw.pids_limit)).toMatch(/^\$\{VCFLEET_SANDBOX_WORKER_PIDS:-\d+\}$/);
  });

  it('ships the sandbox-worker seccomp profile as seccomp-filter.py generates it: bwrap\'s calls allowed, the rest of the list refused', async (ctx) => {
    const file = JSON.parse(readFileSync(path.join(ROOT, 'sandbox-worker-seccomp.json'), 'utf8'));
    if (!existsSync(SECCOMP_PYTHON)) ctx.skip(`${SECCOMP_PYTHON} is missing`);
    expect(file).toEqual(await dockerSeccompProfile());
    expect(file.defaultAction).toBe('SCMP_ACT_ALLOW');
    const refused: string[] = file.syscalls.flatMap((s: { names: string[]; action: string }) => (s.action === 'SCMP_ACT_ERRNO' ? s.names : []));
    for (const needed of ['mount', 'umount2', 'pivot_root', 'unshare', 'setns', 'clone3', 'chroot', 'sethostname']) expect(refused).not.toContain(needed);
    for (const denied of ['ptrace', 'bpf', 'kexec_load', 'init_module', 'io_uring_setup', 'userfaultfd', 'keyctl', 'open_by_handle_at']) expect(refused).toContain(denied);
  });
});

describe('.ci/compose.ci.yml (the compose CI run)', () => {
  // `!reset []`: compose's tag for "drop the base file's list" (Redis's published port).
  const reset = { tag: '!reset', collection: 'seq' as const, resolve: (seq: unknown) => seq };
  const ci = YAML.parse(readFileSync(path.join(ROOT, '.ci/compose.ci.yml'), 'utf8'), { merge: true, customTags: [reset] }) as { services: Record<string, Service> };
  it('adds the scripted servers as services of the fleet image and changes nothing of the others but Redis\'s image and ports', () => {
    const added = Object.keys(ci.services).filter((n) => !(n in compose.services));
    expect(added.sort()).toEqual(['demo-benchmark', 'scripted-judge', 'scripted-policy']);
    for (const name of added) {
      expect(ci.services[name].entrypoint, name).toEqual(['/usr/bin/tini', '--', 'node', 'bin/run-ts.js', 'src/demo/serve-scripted.ts']);
      expect(['policy', 'judge', 'benchmark'], name).toContain(argv(ci.services[name])[0]);
    }
    expect(existsSync(path.join(ROOT, 'src/demo/serve-scripted.ts'))).toBe(true);
    for (const [name, s] of Object.entries(ci.services).filter(([n]) => n in compose.services && n !== 'redis')) {
      expect(Object.keys(s), name).toEqual(['depends_on']);
      for (const dep of Object.keys(s.depends_on!)) expect(added, `${name} -> ${dep}`).toContain(dep);
    }
    expect(compose.services.producer.profiles).toEqual(ci.services['demo-benchmark'].profiles);
    expect(ci.services.redis.ports).toEqual([]); // the host's own Redis may hold 127.0.0.1:6379
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  it('builds the fleet from node 20 with production dependencies and the sandbox tools', () => {
    // The base is a build argument (default: the pinned node image), so an offline build can name a local one.
    expect(text).toMatch(/^ARG NODE_IMAGE=node:20-bookworm-slim(@sha256:[0-9a-f]{64})?$/m);
    expect(text).toMatch(/^FROM \$\{NODE_IMAGE\}$/m);
    // No `# syntax=` line: BuildKit would fetch that frontend image from a registry first.
    expect(text).not.toMatch(/^# *syntax=/m);
    expect(text).toContain('npm ci --omit=dev');
    expect(text).toContain('npm ls --omit=dev'); // npm can exit 0 from an install whose downloads failed
    for (const pkg of ['bubblewrap', 'redis-tools', 'python3-pil', 'python3-numpy', 'python3-scipy', 'python3-opencv', 'python3-seccomp']) expect(text).toContain(pkg);
    expect(text).toMatch(/^ENTRYPOINT \[.*"node", "bin\/vcfleet\.js"\]$/m);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.dependencies).toHaveProperty('tsx'); // bin/vcfleet.js needs it at run time
  });
});
