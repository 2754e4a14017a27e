/**
 * A rendered Kubernetes container spec as `docker run` arguments, as a kubelet would run it: the
 * image's entrypoint replaced by `command`, `args` after it, `$(VAR)` references in command, args
 * and env values expanded from the env defined before them (`$$` is a `$`), env from the ConfigMap
 * (envFrom) and the Secret (secretKeyRef; optional keys may be missing), the securityContext as
 * docker's options (user, capabilities, seccomp, AppArmor, procMount, no-new-privileges), the memory
 * limit, volumes, and the readiness probe as the container's health check. Used by .ci/k8s-pods.ts.
 */
import path from 'node:path';

export interface K8sContainer {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; fieldRef?: { fieldPath: string } } }>;
  envFrom?: Array<{ configMapRef?: { name: string } }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number }; exec?: { command: string[] } };
  resources?: { limits?: { memory?: string } };
  securityContext?: {
    runAsUser?: number;
    runAsGroup?: number;
    capabilities?: { add?: string[]; drop?: string[] };
    seccompProfile?: { type: string; localhostProfile?: string };
    appArmorProfile?: { type: string };
    procMount?: string;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
  };
  ports?: Array<{ name: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

export interface PodContext {
  /** ConfigMaps and Secrets of the render, by name (Secret data decoded). */
  configMaps: Record<string, Record<string, string>>;
  secrets: Record<string, Record<string, string>>;
  /** The pod's securityContext (runAsUser, runAsGroup). */
  podSecurity?: { runAsUser?: number; runAsGroup?: number };
  /** The docker volume of each pod volume name (an emptyDir: one made writable to all, as the kubelet makes it). */
  volumes: Record<string, string>;
  /** A Localhost seccomp profile's file on this host, by its localhostProfile. */
  seccompFiles: Record<string, string>;
}

/** Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$` is `$`, anything else stays. */
export function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string | undefined) => (m === '$$' ? '$' : name !== undefined && name in env ? env[name] : m));
}

/** Kubernetes' memory quantity ("18Gi", "512Mi") in docker's words ("18g", "512m"). */
function memory(q: string): string {
  const m = /^(\d+)(Ki|Mi|Gi|Ti)?$/.exec(q);
  if (!m) throw new Error(`memory limit ${q}: not a quantity this stage reads (use Ki, Mi, Gi or Ti)`);
  return `${m[1]}${{ Ki: 'k', Mi: 'm', Gi: 'g', Ti: 't' }[m[2] ?? ''] ?? 'b'}`;
}

/** The container's environment, in the order Kubernetes builds it. */
export function environment(c: K8sContainer, ctx: PodContext): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    const name = from.configMapRef?.name;
    if (!name || !ctx.configMaps[name]) throw new Error(`${c.name}: envFrom names ConfigMap ${name}, which the render has not`);
    Object.assign(env, ctx.configMaps[name]);
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = expand(e.value, env);
    else if (e.valueFrom?.secretKeyRef) {
      const { name, key, optional } = e.valueFrom.secretKeyRef;
      const value = ctx.secrets[name]?.[key];
      if (value !== undefined) env[e.name] = value;
      else if (!optional) throw new Error(`${c.name}: ${e.name} needs key ${key} of Secret ${name}, which is missing`);
    } else throw new Error(`${c.name}: ${e.name} comes from ${JSON.stringify(e.valueFrom)}, which this stage cannot give a container`);
  }
  return env;
}

/** `docker run` options and the command after the image, for `c` of a pod; the environment apart (an env file: keys stay off command lines). */
export function dockerRun(c: K8sContainer, ctx: PodContext): { options: string[]; env: Record<string, string>; argv: string[] } {
  const env = environment(c, ctx);
  // As on a node: the container's own cgroup namespace (cgroup v2).
  const options: string[] = ['--cgroupns', 'private'];
  const sc = c.securityContext ?? {};
  const user = sc.runAsUser ?? ctx.podSecurity?.runAsUser;
  const group = sc.runAsGroup ?? ctx.podSecurity?.runAsGroup;
  if (user !== undefined) options.push('--user', group !== undefined ? `${user}:${group}` : String(user));
  if (sc.privileged) throw new Error(`${c.name}: privileged, which the chart never asks for`);
  for (const cap of sc.capabilities?.drop ?? []) options.push('--cap-drop', cap);
  for (const cap of sc.capabilities?.add ?? []) options.push('--cap-add', cap);
  if (sc.allowPrivilegeEscalation === false) options.push('--security-opt', 'no-new-privileges');
  const seccomp = sc.seccompProfile?.type;
  if (seccomp === 'Unconfined') options.push('--security-opt', 'seccomp=unconfined');
  else if (seccomp === 'Localhost') {
    const file = ctx.seccompFiles[sc.seccompProfile!.localhostProfile ?? ''];
    if (!file) throw new Error(`${c.name}: seccomp profile ${sc.seccompProfile!.localhostProfile} has no file on this host`);
    options.push('--security-opt', `seccomp=${path.resolve(file)}`);
  }
  if (sc.appArmorProfile?.type === 'Unconfined') options.push('--security-opt', 'apparmor=unconfined');
  if (sc.procMount === 'Unmasked') options.push('--security-opt', 'systempaths=unconfined');
  const limit = c.resources?.limits?.memory;
  if (limit) options.push('--memory', memory(limit), '--memory-swap', memory(limit));
  for (const m of c.volumeMounts ?? []) {
    const volume = ctx.volumes[m.name];
    if (!volume) throw new Error(`${c.name}: volume ${m.name} has no docker volume`);
    // volume-nocopy: a pod's volume never takes the image's files (docker would copy them, and their owner, into a new volume).
    options.push('--mount', `type=volume,source=${volume},destination=${m.mountPath},volume-nocopy${m.readOnly ? ',readonly' : ''}`);
  }
  const probe = c.readinessProbe;
  if (probe?.httpGet) {
    const port = typeof probe.httpGet.port === 'number' ? probe.httpGet.port : c.ports?.find((p) => p.name === probe.httpGet!.port)?.containerPort;
    if (!port) throw new Error(`${c.name}: probe port ${probe.httpGet.port} is none of its ports`);
    const url = `http://127.0.0.1:${port}${probe.httpGet.path}`;
    options.push('--health-cmd', `node -e "fetch('${url}').then((r) => process.exit(r.status >= 200 && r.status < 400 ? 0 : 1), () => process.exit(1))"`);
  } else if (probe?.exec) options.push('--health-cmd', probe.exec.command.map((w) => `'${w}'`).join(' '));
  // The kubelet makes the probe's request itself; here each check starts a process (node, on a loaded
  // host, takes seconds to start), so its timeout is the process's, not the probe's timeoutSeconds.
  if (probe) options.push('--health-interval', '5s', '--health-retries', '60', '--health-timeout', '60s');
  const command = (c.command ?? []).map((w) => expand(w, env));
  const args = (c.args ?? []).map((w) => expand(w, env));
  if (command.length > 0) options.push('--entrypoint', command[0]);
  return { options, env, argv: [...command.slice(1), ...args] };
}
