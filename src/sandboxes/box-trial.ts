/**
 * The trial sandbox of preflight: one sandbox made the way a rollout makes it (a gateway it must
 * reach: for a provider whose sandboxes reach the worker over TCP, a small trial listener on a free
 * port named by `sandbox_config.gateway_host`), then what the provider cannot know from its API:
 * a command runs, the image has the toolkit and OpenCode at the path the fleet runs, and the
 * sandbox reaches the gateway. Each failure is one line naming the fix.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../shared/config/load.ts';
import { ConfigError, InfraError, errorMessage } from '../shared/errors.ts';
import type { ExecResult, Sandbox, SandboxProvider, SandboxSpec } from './types.ts';

/** The PATH a rollout's commands get (agent/session-config.ts): the probes see what OpenCode's shell sees. */
const ROLLOUT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** The Python modules the agent's shell is promised (sandbox_image/Dockerfile). */
const TOOLKIT = 'import PIL, numpy, scipy, cv2';
const PROBE_TIMEOUT_MS = 60_000;
/** How long the sandbox's request to the trial gateway may take, in seconds. */
const REACH_TIMEOUT_S = 10;

interface TrialGateway {
  spec: SandboxSpec['gateway'];
  /** What the listener answers, so the probe tells it from anything else on that address. */
  nonce: string;
  close(): Promise<void>;
}

/** A listener on every interface of this worker, on a free port, answering every request with a nonce. */
async function startTrialGateway(host: string): Promise<TrialGateway> {
  const nonce = `vcfleet-preflight-${randomUUID()}`;
  const server = http.createServer((_req, res) => void res.writeHead(200, { 'content-type': 'text/plain' }).end(nonce));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '0.0.0.0', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    spec: { url: `http://${host}:${port}`, port },
    nonce,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

function ended(r: ExecResult): string {
  const how = r.timedOut ? 'timed out' : r.exitCode === null ? `ended by signal ${r.signal}` : `ended with exit code ${r.exitCode}`;
  const said = `${r.stderr}${r.stdout}`.trim().replace(/\s+/g, ' ').slice(-300);
  return `${how}${said ? `: ${said}` : ''}`;
}

/** The image's toolkit and OpenCode, as a rollout runs them. */
async function checkImage(provider: SandboxProvider, config: Pick<Config, 'agent'>, sandbox: Sandbox, image: string): Promise<void> {
  const env = { PATH: ROLLOUT_PATH };
  const toolkit = await sandbox.exec(['python3', '-c', TOOLKIT], { env, timeoutMs: PROBE_TIMEOUT_MS });
  if (toolkit.exitCode !== 0) {
    throw new ConfigError(
      `the sandbox image ${image} has no agent toolkit (python3 -c "${TOOLKIT}" ${ended(toolkit)}): build the image from sandbox_image/ (see sandbox_image/README.md) and set sandbox_config.image (VISUAL_CODING_OPENCODE_SANDBOX_IMAGE) to it`,
    );
  }
  const bin = provider.capabilities.agentBinary(config);
  const opencode = await sandbox.exec([bin, '--version'], { env, timeoutMs: PROBE_TIMEOUT_MS });
  if (opencode.exitCode !== 0) {
    throw new ConfigError(
      `the sandbox image ${image} has no OpenCode at ${bin} (${bin} --version ${ended(opencode)}): set sandbox_config.opencode_bin (VCFLEET_SANDBOX_OPENCODE_BIN) to where the image installs it, or build the image from sandbox_image/ (it installs /opt/opencode/bin/opencode)`,
    );
  }
}

/** The sandbox fetches the trial gateway's nonce, as OpenCode will fetch the model. */
async function checkReach(provider: SandboxProvider, sandbox: Sandbox, trial: TrialGateway): Promise<void> {
  const url = `${trial.spec.url}/v1/preflight`;
  const script = `import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1], timeout=${REACH_TIMEOUT_S}).read().decode())`;
  const r = await sandbox.exec(['python3', '-c', script, url], { env: { PATH: ROLLOUT_PATH }, timeoutMs: PROBE_TIMEOUT_MS });
  if (r.exitCode === 0 && r.stdout.includes(trial.nonce)) return;
  const what = r.exitCode === 0 ? `something else answered there: ${r.stdout.trim().slice(0, 120)}` : ended(r);
  throw new ConfigError(
    `the trial ${provider.name} sandbox cannot reach the gateway at ${trial.spec.url} (${what}): set sandbox_config.gateway_host (VCFLEET_GATEWAY_HOST) to an address of this worker that the sandboxes reach, and let them open any TCP port of it (docs/operate.md, "OpenSandbox")`,
  );
}

/**
 * Start one sandbox the way a rollout does, run the checks, and destroy it. Throws ConfigError naming
 * the setting to change, or InfraError when a sandbox cannot be started at all.
 */
export async function trySandbox(provider: SandboxProvider, config: Pick<Config, 'sandbox_config' | 'agent'>): Promise<void> {
  const caps = provider.capabilities;
  let trial: TrialGateway | null = null;
  let sandbox: Sandbox | null = null;
  try {
    if (caps.gateway === 'tcp') {
      const host = config.sandbox_config.gateway_host;
      if (!host) throw new ConfigError('sandbox_config.gateway_host (VCFLEET_GATEWAY_HOST) must name this worker as the sandboxes reach it');
      trial = await startTrialGateway(host);
    }
    sandbox = await provider.create({ label: 'preflight', gateway: trial?.spec ?? { port: config.sandbox_config.gateway_port } });
    const r = await sandbox.exec(['true'], { timeoutMs: 30_000 });
    if (r.exitCode !== 0) throw new InfraError(`a trial command in a ${provider.name} sandbox ${ended(r)}`);
    if (caps.image !== null) await checkImage(provider, config, sandbox, caps.image);
    if (trial) await checkReach(provider, sandbox, trial);
  } catch (err) {
    if (err instanceof InfraError || err instanceof ConfigError) throw err;
    throw new InfraError(`cannot start a ${provider.name} sandbox on this host: ${errorMessage(err)}`, { cause: err });
  } finally {
    await sandbox?.destroy().catch(() => undefined);
    await trial?.close();
  }
}
