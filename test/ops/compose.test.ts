/**
 * docker-compose.yml and the Dockerfile agree with the CLI: the compose file parses, every command
 * a fleet service runs is a `vcfleet` subcommand (worker roles included) with options it knows, Redis
 * persists and never evicts, scaled services can be scaled, and every role gets REDIS_URL.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.ts';
import { WORKER_ROLES } from '../../src/cli/commands/worker.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

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

  it('gives every role REDIS_URL and the dashboard its credentials', () => {
    for (const [name, s] of fleetServices) expect(s.environment?.REDIS_URL, name).toBe('redis://redis:6379');
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
    expect(compose.services['sandbox-worker'].cap_add).toContain('SYS_ADMIN');
    expect(compose.services['sandbox-worker'].security_opt).toContain('seccomp=unconfined');
    expect(compose.services.results.volumes?.some((v) => v.endsWith(':/app/results'))).toBe(true);
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  it('builds the fleet from node 20 with production dependencies and the sandbox tools', () => {
    expect(text).toMatch(/^FROM node:20-bookworm-slim(@sha256:[0-9a-f]{64})?$/m);
    expect(text).toContain('npm ci --omit=dev');
    for (const pkg of ['bubblewrap', 'redis-tools', 'python3-pil', 'python3-numpy', 'python3-scipy', 'python3-opencv']) expect(text).toContain(pkg);
    expect(text).toMatch(/^ENTRYPOINT \[.*"node", "bin\/vcfleet\.js"\]$/m);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.dependencies).toHaveProperty('tsx'); // bin/vcfleet.js needs it at run time
  });
});
