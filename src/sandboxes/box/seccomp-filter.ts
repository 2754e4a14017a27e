/**
 * The sandboxes' seccomp filter, from seccomp-filter.py beside this file through libseccomp (Debian's
 * `python3-seccomp`, under the system Python: a pyenv or venv `python3` on the PATH does not have it):
 * as a BPF program for `bwrap --seccomp FD` (`local` sandboxes; built once per provider), as the
 * Docker profile of `docker` sandboxes (docker/sandbox-seccomp.json is its output), and as the
 * sandbox-worker container's profile (sandbox-worker-seccomp.json beside docker-compose.yml).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { InfraError } from '../../shared/errors.ts';

/** The Python that has Debian's libseccomp bindings. */
export const SECCOMP_PYTHON = '/usr/bin/python3';
export const SECCOMP_SCRIPT = fileURLToPath(new URL('./seccomp-filter.py', import.meta.url));
const HINT = 'install python3-seccomp (`apt-get install python3-seccomp`), the libseccomp bindings of the system Python';

function runScript(args: string[], python: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    execFile(python, ['-I', SECCOMP_SCRIPT, ...args], { encoding: 'buffer', timeout: 30_000, env: { PATH: '/usr/bin:/bin' } }, (err, out, stderr) => {
      if (!err) return resolve(out);
      const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? `${python} not found` : stderr.toString().trim().split('\n').pop() || err.message;
      reject(new InfraError(`cannot build the sandbox seccomp filter (${why}); ${HINT}`, { cause: err }));
    });
  });
}

/** The BPF program (8 bytes per instruction). Throws InfraError with an install hint. */
export async function buildSeccompFilter(python = SECCOMP_PYTHON): Promise<Buffer> {
  const bpf = await runScript(['bpf'], python);
  if (bpf.length === 0 || bpf.length % 8 !== 0) throw new InfraError(`the seccomp filter from ${SECCOMP_SCRIPT} is not a BPF program (${bpf.length} bytes)`);
  return bpf;
}

/** This machine's numbers of the named system calls, from libseccomp (negative: not on this architecture). */
export async function syscallNumbers(names: readonly string[], python = SECCOMP_PYTHON): Promise<Record<string, number>> {
  return JSON.parse((await runScript(['numbers', ...names], python)).toString('utf8')) as Record<string, number>;
}

/** The sandbox-worker container's Docker seccomp profile (sandbox-worker-seccomp.json beside docker-compose.yml is this output). */
export async function dockerSeccompProfile(python = SECCOMP_PYTHON): Promise<unknown> {
  return JSON.parse((await runScript(['docker-profile'], python)).toString('utf8'));
}

/** The `docker` sandboxes' Docker seccomp profile (docker/sandbox-seccomp.json is this output). */
export async function dockerSandboxSeccompProfile(python = SECCOMP_PYTHON): Promise<unknown> {
  return JSON.parse((await runScript(['docker-sandbox-profile'], python)).toString('utf8'));
}
