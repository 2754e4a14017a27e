/**
 * Run inside the compose file's sandbox-worker container by .ci/containers: one sandbox as that
 * worker makes them (its configuration, its provider), and sandboxed code that tries the host's
 * kernel settings. Prints one JSON line: what each write did, the host uid of the sandboxed process
 * as the container sees it, and whether /proc/sys is mounted read-only inside.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadConfig } from '../src/shared/config/load.ts';
import { createLogger } from '../src/shared/logger.ts';
import { createSandboxProvider } from '../src/sandboxes/index.ts';

const MARKER = `vcfleet-box-check-${process.pid}`;
const PROBE = `
import json, os, time
out = {}
for p in ['/proc/sys/kernel/core_pattern', '/proc/sys/vm/swappiness']:
    try:
        v = open(p).read()
        with open(p, 'w') as f: f.write(v)
        out[p] = 'written'
    except OSError as e:
        out[p] = e.strerror
out['proc_sys_ro'] = any(l.split()[4] == '/proc/sys' and l.split()[5].startswith('ro') for l in open('/proc/self/mountinfo'))
print(json.dumps(out), flush=True)
time.sleep(3)  # ${MARKER}
`;

/** The host (container) uids of the sandboxed probe's processes (`python3 -c PROBE`; not the launcher that starts it). */
function uidsOfMarked(): number[] {
  const uids: number[] = [];
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0] !== 'python3' || argv[1] !== '-c' || !argv[2]?.includes(MARKER)) continue;
      uids.push(Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]));
    } catch {
      // gone
    }
  }
  return uids;
}

async function main(): Promise<void> {
  const config = loadConfig({ overrides: ['++agent.kind=scripted'] });
  const provider = createSandboxProvider(config, { logger: createLogger({ level: 'warn' }) });
  const sandbox = await provider.create({ label: 'box-check', gateway: { port: config.sandbox_config.gateway_port } });
  try {
    let uids: number[] = [];
    const looking = setInterval(() => (uids = uids.length ? uids : uidsOfMarked()), 100);
    const r = await sandbox.exec(['python3', '-c', PROBE], { timeoutMs: 60_000 });
    clearInterval(looking);
    process.stdout.write(`${JSON.stringify({ ...JSON.parse(r.stdout.trim() || '{}'), host_uids: uids, exit: r.exitCode, stderr: r.stderr.slice(-300) })}\n`);
  } finally {
    await sandbox.destroy();
    await provider.close();
  }
}

void main();
