/**
 * What must hold in every render of the Helm chart, as a list of what is wrong (empty: all holds):
 * a worker's grace covers its drain (a sandbox-worker's: task_timeout_s plus the time to hand
 * rollouts back), one results writer kept by a PodDisruptionBudget, no key in a ConfigMap, a
 * NetworkPolicy on the sandbox and judge workers, and each role's image and command as
 * docker-compose.yml runs them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import type { Doc } from './helm.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: unknown } }>;
  envFrom?: Array<{ configMapRef?: { name: string } }>;
  ports?: Array<{ name: string; containerPort: number }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}

export interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: { terminationGracePeriodSeconds?: number; containers: Container[] };
}

/** Every pod template of a render, with the document it is in. */
export function podTemplates(docs: Doc[]): Array<{ doc: Doc; pod: PodTemplate }> {
  return docs.flatMap((doc) => {
    const spec = doc.spec as { template?: PodTemplate; jobTargetRef?: { template: PodTemplate } } | undefined;
    const pod = spec?.template ?? spec?.jobTargetRef?.template;
    return pod ? [{ doc, pod }] : [];
  });
}

/** The fleet role a container runs, from its arguments (worker roles by name), or null (Redis). */
export function roleOf(c: Container): string | null {
  const [first, second] = c.args ?? [];
  if (first === 'worker') return second;
  return ({ dashboard: 'dashboard', serve: 'serve', produce: 'producer' } as Record<string, string>)[first] ?? null;
}

/** The value of `--flag` in a container's arguments. */
export function flag(c: Container, name: string): string | undefined {
  const at = (c.args ?? []).indexOf(name);
  return at >= 0 ? c.args![at + 1] : undefined;
}

interface ComposeService {
  image?: string;
  command?: string[];
  entrypoint?: string[];
}

/** docker-compose.yml's service of each chart role. */
const COMPOSE_SERVICE: Record<string, string> = { sandbox: 'sandbox-worker', judge: 'judge-worker', results: 'results', dashboard: 'dashboard', producer: 'producer' };

function composeServices(): Record<string, ComposeService> {
  return (YAML.parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> }).services;
}

/** `${VAR:-default}` → default: the image compose runs when nothing is set. */
function composeDefault(text: string): string {
  return text.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');
}

const SECRET_NAME = /KEY|PASSWORD|TOKEN|SECRET/i;
const DRAIN_MARGIN_S = 30;

export interface InvariantOptions {
  /** The task_timeout_s the chart was rendered with (values taskTimeoutS). */
  taskTimeoutS: number;
  /** Key values given to the render: none may appear in a ConfigMap. */
  secretValues?: string[];
}

export function invariantFailures(docs: Doc[], o: InvariantOptions): string[] {
  const failures: string[] = [];
  const pods = podTemplates(docs);
  const containers = pods.flatMap(({ doc, pod }) => pod.spec.containers.map((c) => ({ doc, pod, c, role: roleOf(c) })));
  const settings = docs.find((d) => d.kind === 'ConfigMap')?.data as Record<string, string> | undefined;

  // 1. grace ≥ drain: every sandbox and judge worker drains on preStop within its grace period.
  for (const { doc, pod, c, role } of containers) {
    if (role !== 'sandbox' && role !== 'judge') continue;
    const where = `${doc.kind} ${doc.metadata.name}`;
    const preStop = c.lifecycle?.preStop?.exec?.command ?? [];
    if (!preStop.join(' ').includes('bin/vcfleet-drain.js')) failures.push(`${where}: no preStop drain (node bin/vcfleet-drain.js)`);
    const drain = Number(flag(c, '--drain-grace'));
    const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
    if (!(drain > 0)) failures.push(`${where}: no --drain-grace`);
    if (role === 'sandbox' && drain < o.taskTimeoutS) failures.push(`${where}: --drain-grace ${drain} s is less than task_timeout_s ${o.taskTimeoutS} s`);
    if (grace < drain + DRAIN_MARGIN_S) failures.push(`${where}: terminationGracePeriodSeconds ${grace} s is less than the drain (${drain} s) plus ${DRAIN_MARGIN_S} s to hand rollouts back`);
  }

  // 2. one results writer.
  const writers = containers.filter((x) => x.role === 'results');
  if (writers.length !== 1) failures.push(`results: ${writers.length} pod templates run the results consumer, not 1`);
  for (const { doc } of writers) {
    const spec = doc.spec as { replicas?: number; strategy?: { type?: string }; selector: { matchLabels: Record<string, string> } };
    if (doc.kind !== 'Deployment' || spec.replicas !== 1) failures.push(`results: ${doc.kind} ${doc.metadata.name} has replicas ${spec.replicas}, not 1`);
    if (spec.strategy?.type !== 'Recreate') failures.push(`results: ${doc.metadata.name} is replaced by ${spec.strategy?.type ?? 'RollingUpdate'}, which runs two writers at once; use Recreate`);
    const pdb = docs.find((d) => d.kind === 'PodDisruptionBudget' && JSON.stringify((d.spec as { selector: unknown }).selector) === JSON.stringify(spec.selector));
    if (!pdb || (pdb.spec as { maxUnavailable?: number }).maxUnavailable !== 0) failures.push('results: no PodDisruptionBudget with maxUnavailable 0 keeps the writer');
    const scaled = docs.find((d) => d.kind === 'ScaledObject' && (d.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name === doc.metadata.name);
    if (scaled) failures.push(`results: ScaledObject ${scaled.metadata.name} scales the single writer`);
  }

  // 3. no key in a ConfigMap.
  for (const cm of docs.filter((d) => d.kind === 'ConfigMap')) {
    for (const [k, v] of Object.entries((cm.data ?? {}) as Record<string, string>)) {
      if (SECRET_NAME.test(k)) failures.push(`ConfigMap ${cm.metadata.name}: ${k} looks like a key; keys go in the Secret`);
      for (const s of o.secretValues ?? []) if (s && String(v).includes(s)) failures.push(`ConfigMap ${cm.metadata.name}: ${k} holds a key given as a secret`);
    }
  }
  for (const { doc, c } of containers) {
    for (const e of c.env ?? []) if (SECRET_NAME.test(e.name) && e.value !== undefined) failures.push(`${doc.kind} ${doc.metadata.name}: ${e.name} is set in clear, not from the Secret`);
  }

  // 4. a NetworkPolicy with egress rules over the sandbox and judge workers.
  for (const role of ['sandbox', 'judge']) {
    const labels = containers.find((x) => x.role === role)?.pod.metadata.labels ?? {};
    const policy = docs.find((d) => {
      if (d.kind !== 'NetworkPolicy') return false;
      const spec = d.spec as { podSelector: { matchLabels: Record<string, string> }; policyTypes?: string[] };
      return Object.entries(spec.podSelector.matchLabels).every(([k, v]) => labels[k] === v) && (spec.policyTypes ?? []).includes('Egress');
    });
    if (!policy) failures.push(`NetworkPolicy: none limits the egress of the ${role} workers`);
  }

  // 5. image and command as docker-compose.yml runs each role.
  const compose = composeServices();
  const local = (settings?.VCFLEET_SANDBOX_PROVIDER ?? 'local') === 'local';
  for (const { doc, c, role } of containers) {
    const service = role ? compose[COMPOSE_SERVICE[role]] : undefined;
    if (!service) continue;
    const where = `${doc.kind} ${doc.metadata.name} (${role})`;
    const image = composeDefault(service.image ?? '');
    if (c.image !== image) failures.push(`${where}: image ${c.image}, where docker-compose.yml runs ${image}`);
    const command = service.command ?? [];
    if (JSON.stringify((c.args ?? []).slice(0, command.length)) !== JSON.stringify(command)) failures.push(`${where}: args ${JSON.stringify(c.args)} do not start with docker-compose.yml's command ${JSON.stringify(command)}`);
    const entrypoint = role === 'sandbox' && !local ? undefined : service.entrypoint;
    if (JSON.stringify(c.command) !== JSON.stringify(entrypoint)) failures.push(`${where}: command ${JSON.stringify(c.command)}, where docker-compose.yml's entrypoint is ${JSON.stringify(entrypoint)} (none: the image's)`);
  }
  return failures;
}

/** values.yaml's defaults. */
export function chartDefaults(): { taskTimeoutS: number; drainSeconds: number } {
  return YAML.parse(readFileSync(path.join(ROOT, 'deploy/helm/vcfleet/values.yaml'), 'utf8')) as { taskTimeoutS: number; drainSeconds: number };
}
