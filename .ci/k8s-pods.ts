/**
 * CI stage of .ci/containers: the Helm chart's pod specs, run. The chart (deploy/helm/vcfleet) is
 * rendered with the real helm; each role's container spec (image, command, args, env from the
 * rendered ConfigMap and Secret, ports, readiness probe, securityContext, limits, volumes) is started
 * as a container on the Docker engine (.ci/k8s-pod-run.ts, the kubelet's rules), with the in-chart
 * Redis from its own rendered spec and the scripted policy and judge of .ci/compose.ci.yml beside
 * them; the producer Job's pod produces a run of the demo puzzles, every row must be scored; the
 * sandbox-worker is drained through its preStop hook; then everything made here is removed.
 *
 *   node bin/run-ts.js .ci/k8s-pods.ts --image visual-coding-fleet:ci --redis-image vcfleet-base/redis:7-bookworm [--timeout 600]
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { render, type Doc } from '../test/helpers/helm.ts';
import { podTemplates } from '../test/helpers/chart-invariants.ts';
import { dockerRun, type K8sContainer, type PodContext } from './k8s-pod-run.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const argv = process.argv.slice(2);
const option = (name: string, fallback?: string): string => {
  const at = argv.indexOf(name);
  const value = at >= 0 ? argv[at + 1] : fallback;
  if (value === undefined) throw new Error(`${name} is required (see the usage at the top of .ci/k8s-pods.ts)`);
  return value;
};
const IMAGE = option('--image');
const REDIS_IMAGE = option('--redis-image');
const TIMEOUT_S = Number(option('--timeout', '600'));
const TAG = randomBytes(4).toString('hex');
const LABEL = `vcfleet.k8s-ci=${TAG}`;
const NET = `vcfleet-k8s-${TAG}`;
const RUN_ID = `ci-k8s-${TAG}`;
const work = mkdtempSync(path.join(tmpdir(), 'vcfleet-k8s-'));
const secret = () => randomBytes(18).toString('base64url');
const started = Date.now();
const log = (msg: string) => console.log(`   [${Math.round((Date.now() - started) / 1000)}s] ${msg}`);

async function docker(...args: string[]): Promise<string> {
  try {
    return (await promisify(execFile)('docker', args, { maxBuffer: 64 * 1024 * 1024 })).stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`docker ${args.slice(0, 2).join(' ')} …: ${(e.stderr ?? e.message).trim()}`);
  }
}

/** A container's last log lines, stdout and stderr. */
async function logsOf(name: string, lines = 60): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)('docker', ['logs', '--tail', String(lines), name], { maxBuffer: 16 * 1024 * 1024 });
    return `${stdout}${stderr}`.slice(-4000);
  } catch {
    return '';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Wait until the container's health check passes; its logs on failure. */
async function healthy(name: string, timeoutS = 600): Promise<void> {
  const deadline = Date.now() + timeoutS * 1000;
  for (;;) {
    const state = await docker('inspect', '-f', '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}', name);
    if (state === 'running healthy') return;
    if (!state.startsWith('running') || Date.now() > deadline) throw new Error(`${name} is ${state}, not healthy:\n${await logsOf(name)}`);
    await sleep(1000);
  }
}

async function main(): Promise<void> {
  const [repository, tag] = [IMAGE.slice(0, IMAGE.lastIndexOf(':')), IMAGE.slice(IMAGE.lastIndexOf(':') + 1)];
  const keys = { REDIS_PASSWORD: secret(), POLICY_API_KEY: 'ci-policy-key', OPENAI_API_KEY: 'ci-judge-key', VCFLEET_DASHBOARD_PASSWORD: secret() };
  const docs: Doc[] = await render({
    set: [
      `image.repository=${repository}`, `image.tag=${tag}`, 'image.pullPolicy=Never', `redis.internal.image=${REDIS_IMAGE}`, 'redis.internal.persistence.enabled=false',
      'policy.baseUrl=http://scripted-policy:8000/v1', 'policy.model=scripted-demo-vlm', 'judge.baseUrl=http://scripted-judge:8001/v1',
      'dashboard.user=ci', 'producer.enabled=true', `producer.args={produce,--run-id,${RUN_ID}}`,
      ...Object.entries(keys).map(([k, v]) => `secrets.values.${k}=${v}`),
    ],
  });
  const configMaps = Object.fromEntries(docs.filter((d) => d.kind === 'ConfigMap').map((d) => [d.metadata.name, d.data as Record<string, string>]));
  const secrets = Object.fromEntries(docs.filter((d) => d.kind === 'Secret').map((d) => [d.metadata.name, Object.fromEntries(Object.entries(d.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]))]));
  const volumes = { results: `vcfleet-k8s-${TAG}-results`, data: `vcfleet-k8s-${TAG}-data` };
  const seccompFiles = { 'vcfleet/sandbox-worker-seccomp.json': path.join(ROOT, 'sandbox-worker-seccomp.json') };
  const pods = podTemplates(docs).map(({ doc, pod }) => ({ doc, pod: pod as unknown as { spec: { containers: K8sContainer[]; securityContext?: PodContext['podSecurity']; terminationGracePeriodSeconds?: number } } }));
  const podOf = (nameEnd: string) => {
    const found = pods.find((p) => p.doc.metadata.name.endsWith(nameEnd) || p.doc.metadata.name.includes(`${nameEnd}-`));
    if (!found) throw new Error(`the render has no pod ${nameEnd}`);
    return found;
  };

  /** Start the pod's one container as the kubelet would; returns its container name. */
  const startPod = async (nameEnd: string, extraVolumes: Record<string, string> = {}, detach = true): Promise<string> => {
    const { doc, pod } = podOf(nameEnd);
    const c = pod.spec.containers[0];
    const name = `vcfleet-k8s-${TAG}${nameEnd}`;
    const ctx: PodContext = { configMaps, secrets, podSecurity: pod.spec.securityContext, volumes: { ...volumes, ...extraVolumes }, seccompFiles };
    const run = dockerRun(c, ctx);
    const envFile = path.join(work, `${name}.env`);
    writeFileSync(envFile, Object.entries(run.env).map(([k, v]) => `${k}=${v}`).join('\n') + '\n', { mode: 0o600 });
    // The Service of the role has the Deployment's (or StatefulSet's) name: other pods reach it by it.
    const common = ['--name', name, '--label', LABEL, '--network', NET, '--network-alias', doc.metadata.name, '--env-file', envFile, ...run.options];
    if (detach) await docker('run', '-d', ...common, c.image, ...run.argv);
    else {
      const out = await docker('run', ...common, c.image, ...run.argv);
      console.log(out.split('\n').map((l) => `   | ${l}`).join('\n'));
    }
    log(`${doc.kind} ${doc.metadata.name}: ${c.image} ${[...(c.command ?? []).slice(0, 1), ...(c.args ?? [])].join(' ').slice(0, 110)}`);
    return name;
  };

  /** A volume as the kubelet hands it to a pod: an emptyDir open to every user (0777); a claim with the pod's fsGroup as its group (g+rws). */
  const makeVolume = async (name: string, fsGroup?: number) => {
    await docker('volume', 'create', '--label', LABEL, name);
    const script = fsGroup === undefined ? 'chmod 0777 /v' : `chgrp ${fsGroup} /v && chmod 2775 /v`;
    await docker('run', '--rm', '--label', LABEL, '--user', '0', '--mount', `type=volume,source=${name},destination=/v,volume-nocopy`, '--entrypoint', 'sh', IMAGE, '-c', script);
  };
  await docker('network', 'create', '--label', LABEL, NET);
  const resultsGroup = (podOf('-results').pod.spec.securityContext as { fsGroup?: number } | undefined)?.fsGroup;
  await makeVolume(volumes.results, resultsGroup);
  await makeVolume(volumes.data);
  const emptyDir = `vcfleet-k8s-${TAG}-redis-data`;
  await makeVolume(emptyDir);
  const redis = await startPod('-redis', { data: emptyDir });
  await healthy(redis);
  // The scripted policy and judge of .ci/compose.ci.yml (stand-ins for the endpoints, not chart roles).
  for (const [role, port] of [['policy', 8000], ['judge', 8001]] as const) {
    const name = `vcfleet-k8s-${TAG}-scripted-${role}`;
    await docker('run', '-d', '--name', name, '--label', LABEL, '--network', NET, '--network-alias', `scripted-${role}`, '--entrypoint', '/usr/bin/tini',
      '--health-cmd', `node -e "fetch('http://127.0.0.1:${port}/v1/models').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"`, '--health-interval', '2s', '--health-retries', '60',
      IMAGE, '--', 'node', 'bin/run-ts.js', 'src/demo/serve-scripted.ts', role, '--port', String(port));
    await healthy(name);
  }
  const roles = [await startPod('-results'), await startPod('-judge'), await startPod('-sandbox'), await startPod('-dashboard')];
  for (const name of roles) await healthy(name);
  log('every role healthy by its rendered readiness probe');

  // The producer Job's pod, its data volume holding the demo puzzles as the prepared benchmark (as .ci/compose.ci.yml's demo-benchmark).
  await docker('run', '--rm', '--label', LABEL, '--mount', `type=volume,source=${volumes.data},destination=/app/data,volume-nocopy`, '--entrypoint', '/usr/bin/tini', IMAGE, '--', 'node', 'bin/run-ts.js', 'src/demo/serve-scripted.ts', 'benchmark', '--data-dir', 'data');
  await startPod('-producer', {}, false);

  const results = roles[0];
  const statusOf = async () => JSON.parse(await docker('exec', results, 'node', 'bin/vcfleet.js', 'status', '--run-id', RUN_ID, '--json')) as { complete: boolean; rows: number; scored: number; run: { total: number }; output: { path: string } };
  const deadline = Date.now() + TIMEOUT_S * 1000;
  let status = await statusOf();
  while (!status.complete) {
    if (Date.now() > deadline) throw new Error(`run ${RUN_ID} not complete after ${TIMEOUT_S} s: ${JSON.stringify(status).slice(0, 400)}`);
    await sleep(5000);
    status = await statusOf();
    log(`${status.rows} of ${status.run.total} rows`);
  }
  if (!(status.run.total > 0 && status.rows === status.run.total && status.scored === status.run.total)) throw new Error(`not every row is scored: ${JSON.stringify(status).slice(0, 400)}`);
  const rows = (await docker('exec', results, 'cat', status.output.path)).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  for (const r of rows) {
    console.log(`   | ${r.task_id}: answered ${r.extracted_answer ?? 'nothing'} (expected ${r.expected_answer}), ${r.stop_reason}, judge ${r.judge_verdict ?? '-'}, reward ${r.reward ?? 'masked'}`);
    if (r.extracted_answer == null || r.judge_verdict == null || r.failure_kind != null) throw new Error(`row ${r.task_id} has no answer or no verdict`);
  }
  if (rows.length !== status.run.total) throw new Error(`${status.output.path} holds ${rows.length} rows, not ${status.run.total}`);
  log(`run ${RUN_ID}: ${rows.length} rows, every one scored`);

  // The sandbox-worker's preStop hook, as the kubelet runs it before SIGTERM: the worker drains and
  // exits 0, and the container with it (tini is PID 1), which ends the hook too, as in a pod.
  const sandbox = roles[2];
  const hook = await docker('exec', sandbox, 'node', 'bin/vcfleet-drain.js', '--timeout', '120').catch((err: Error) => `the hook ended with the container (${err.message.slice(0, 80)})`);
  const code = await docker('wait', sandbox);
  const worker = await logsOf(sandbox, 20);
  if (code !== '0' || !worker.includes('SIGUSR2: draining') || !worker.includes('sandbox worker stopped')) throw new Error(`the sandbox-worker's preStop drain: exit ${code}; hook: ${hook}; worker:\n${worker}`);
  log(`preStop (node bin/vcfleet-drain.js): the sandbox-worker drained and exited 0; ${hook.split('\n').pop()}`);
}

async function cleanup(): Promise<void> {
  const ids = (await docker('ps', '-aq', '--filter', `label=${LABEL}`)).split('\n').filter(Boolean);
  if (ids.length > 0) await docker('rm', '-f', '-v', ...ids);
  await docker('network', 'rm', NET).catch(() => '');
  const vols = (await docker('volume', 'ls', '-q', '--filter', `label=${LABEL}`)).split('\n').filter(Boolean);
  if (vols.length > 0) await docker('volume', 'rm', ...vols);
  rmSync(work, { recursive: true, force: true });
  const left = `${await docker('ps', '-aq', '--filter', `label=${LABEL}`)}${await docker('network', 'ls', '-q', '--filter', `label=${LABEL}`)}${await docker('volume', 'ls', '-q', '--filter', `label=${LABEL}`)}`;
  if (left) throw new Error(`left behind with label ${LABEL}: ${left}`);
}

let failed = false;
// Stopped (Ctrl-C, a CI timeout): remove what this run made, then exit.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    console.error(`${sig}: removing the containers, network and volumes of this run`);
    void cleanup().finally(() => process.exit(130));
  });
}
try {
  await main();
} catch (err) {
  failed = true;
  console.error(`FAILED: ${(err as Error).message}`);
  const names = (await docker('ps', '-a', '--filter', `label=${LABEL}`, '--format', '{{.Names}}').catch(() => '')).split('\n').filter(Boolean);
  for (const n of names) console.error(`--- ${n}\n${await logsOf(n, 30)}`);
} finally {
  await cleanup().catch((err) => {
    failed = true;
    console.error(`FAILED to clean up: ${(err as Error).message}`);
  });
}
if (failed) process.exit(1);
console.log('   the pods of the chart ran a run, every row scored; nothing left');
