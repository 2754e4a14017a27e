/**
 * The Helm chart with the real tools, no cluster: `helm lint --strict` and `helm template` for the
 * defaults and every documented variant (deploy/helm/examples), every rendered document valid
 * against the Kubernetes or KEDA schema, the invariants held (test/helpers/chart-invariants.ts),
 * each invariant and the schema check seen to fail on a deliberately broken render, and the values
 * that cannot work refused at render with what to do.
 */
import { describe, expect, it } from 'vitest';
import { chartDefaults, invariantFailures, podTemplates, roleOf } from '../helpers/chart-invariants.ts';
import { find, helmLint, render, renderText, schemaError, VARIANTS, type Doc } from '../helpers/helm.ts';

const { taskTimeoutS } = chartDefaults();
// Keys given at install, as a user would (--set secrets.values.…): none may leave the Secret.
const KEYS = ['POLICY_API_KEY=sk-policy-CHARTSECRET-1', 'OPENAI_API_KEY=sk-judge-CHARTSECRET-2', 'VCFLEET_DASHBOARD_PASSWORD=dash-CHARTSECRET-3', 'REDIS_PASSWORD=redis-CHARTSECRET-4'];
const keySets = KEYS.map((k) => `secrets.values.${k}`);
const keyValues = KEYS.map((k) => k.split('=')[1]);

const clone = (docs: Doc[]): Doc[] => structuredClone(docs);

describe('the chart renders and validates for every variant', () => {
  it('lists the variants the docs name', () => {
    expect(Object.keys(VARIANTS)).toEqual(expect.arrayContaining(['defaults', 'external-redis', 'sentinel', 'cluster', 'opensandbox', 'local-sandboxes', 'keda', 'keda-scaledjob', 'serve']));
  });

  for (const [name, values] of Object.entries(VARIANTS)) {
    it(`${name}: lints, renders, every document valid, the invariants hold`, async () => {
      const lint = await helmLint({ values, set: keySets });
      expect(lint.code, lint.stdout + lint.stderr).toBe(0);
      const docs = await render({ values, set: keySets });
      expect(docs.length).toBeGreaterThan(5);
      expect(docs.map(schemaError).filter(Boolean)).toEqual([]);
      expect(invariantFailures(docs, { taskTimeoutS, secretValues: keyValues })).toEqual([]);
      // The keys are in the Secret (base64), nowhere else in clear.
      const secret = docs.find((d) => d.kind === 'Secret');
      const clear = JSON.stringify(docs.filter((d) => d.kind !== 'Secret'));
      for (const v of keyValues) expect(clear).not.toContain(v);
      if (secret) expect(Buffer.from((secret.data as Record<string, string>).POLICY_API_KEY, 'base64').toString()).toBe('sk-policy-CHARTSECRET-1');
    });
  }

  it('runs what each variant promises', async () => {
    const kinds = async (v: string) => (await render({ values: VARIANTS[v], set: keySets })).map((d) => `${d.kind}/${d.metadata.name.replace(/^ci-vcfleet-/, '')}`);
    expect(await kinds('defaults')).toEqual(expect.arrayContaining(['StatefulSet/redis', 'Deployment/sandbox', 'Deployment/judge', 'Deployment/results', 'Deployment/dashboard', 'NetworkPolicy/sandbox-worker', 'NetworkPolicy/judge-worker']));
    expect(await kinds('defaults')).not.toContain('ScaledObject/sandbox');
    expect(await kinds('external-redis')).not.toContain('StatefulSet/redis');
    expect(await kinds('keda')).toEqual(expect.arrayContaining(['ScaledObject/sandbox', 'ScaledObject/judge']));
    const job = await kinds('keda-scaledjob');
    expect(job).toEqual(expect.arrayContaining(['ScaledJob/sandbox', 'ScaledObject/judge']));
    expect(job).not.toContain('Deployment/sandbox');
    expect(await kinds('serve')).toEqual(expect.arrayContaining(['Deployment/serve', 'Service/serve', 'Job/producer-1']));

    // The ScaledJob's pods run one rollout each and leave; the sandbox provider's quota bounds them.
    const docs = await render({ values: VARIANTS['keda-scaledjob'], set: keySets });
    const scaledJob = find(docs, 'ScaledJob', '-sandbox')!;
    const worker = podTemplates([scaledJob])[0].pod.spec.containers[0];
    expect(worker.args).toEqual(expect.arrayContaining(['--max-jobs', '1', '--idle-exit']));
    // One rollout at a time: a second one taken beside it would be handed back when the first ends.
    expect(worker.args!.slice(2, 4)).toEqual(['--concurrency', '1']);
    expect((scaledJob.spec as { maxReplicaCount: number }).maxReplicaCount).toBe(500);
    // A ScaledObject's maximum: the quota over each pod's rollouts (100 / 2).
    const scaled = find(await render({ values: VARIANTS.keda, set: keySets }), 'ScaledObject', '-sandbox')!;
    expect((scaled.spec as { maxReplicaCount: number }).maxReplicaCount).toBe(50);
  });

  it('gives local sandboxes what bubblewrap needs, and opensandbox workers nothing extra', async () => {
    const sandboxOf = async (v: string) => podTemplates(await render({ values: VARIANTS[v], set: keySets })).flatMap((p) => p.pod.spec.containers).find((c) => roleOf(c) === 'sandbox') as unknown as { securityContext: Record<string, unknown> };
    const local = (await sandboxOf('defaults')).securityContext;
    expect(local).toMatchObject({ runAsUser: 0, privileged: false, capabilities: { add: ['SYS_ADMIN'] }, appArmorProfile: { type: 'Unconfined' }, procMount: 'Unmasked', seccompProfile: { type: 'Localhost', localhostProfile: 'vcfleet/sandbox-worker-seccomp.json' } });
    expect((await sandboxOf('local-sandboxes')).securityContext.seccompProfile).toEqual({ type: 'Unconfined' });
    expect((await sandboxOf('opensandbox')).securityContext).toEqual({ runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } });
  });
});

describe('refused at render, saying what to do', () => {
  const refused = async (set: string[], setString: string[] = []) => {
    const r = await renderText({ set: [...set], setString });
    expect(r.code).not.toBe(0);
    return r.stderr;
  };

  it('a Cluster without a hash-tagged prefix', async () => {
    const cluster = ['redis.mode=cluster', 'redis.cluster.nodes={n1:6379}', 'secrets.values.REDIS_PASSWORD=x'];
    expect(await refused(cluster)).toContain('redis.mode=cluster needs a hash-tagged prefix so that every key of the fleet is in one slot');
    expect(await refused(cluster)).toContain(`write prefix: "{vcfleet}" in your values file (or --set-string 'prefix=\\{vcfleet\\}')`);
    // helm's --set reads {vcfleet} as a list: said so, with the way that works.
    expect(await refused(cluster, ['prefix={vcfleet}'])).toContain('helm --set reads {…} as a list');
    // The advice, pasted: renders.
    expect((await renderText({ set: cluster, setString: ['prefix=\\{vcfleet\\}'] })).code).toBe(0);
  });

  it('an external Redis without its password, an unknown mode, opensandbox without its server', async () => {
    expect(await refused(['redis.mode=standalone', 'redis.standalone.host=r'])).toContain('give the Redis password, as secrets.values.REDIS_PASSWORD');
    expect(await refused(['redis.mode=memcached'])).toContain('redis.mode is "memcached": use one of internal, standalone, sentinel, cluster');
    expect(await refused(['sandbox.provider=opensandbox'])).toContain('sandbox.provider=opensandbox needs sandbox.opensandbox.domain');
  });
});

describe('each check fails on a broken render', () => {
  it('the schema check rejects a document Kubernetes would refuse', async () => {
    const docs = clone(await render({ set: keySets }));
    const deployment = find(docs, 'Deployment', '-judge')!;
    (deployment.spec as { replicas: unknown }).replicas = 'two';
    expect(schemaError(deployment)).toMatch(/replicas/);
    const pdb = find(docs, 'PodDisruptionBudget', '-results')!;
    (pdb as { kind: string }).kind = 'PodDisruptionBudjet';
    expect(schemaError(pdb)).toContain('no schema for policy/v1/PodDisruptionBudjet');
  });

  it('grace shorter than the drain, a worker without preStop', async () => {
    const docs = clone(await render({ set: keySets }));
    const sandbox = podTemplates([find(docs, 'Deployment', '-sandbox')!])[0].pod;
    sandbox.spec.terminationGracePeriodSeconds = taskTimeoutS;
    delete podTemplates([find(docs, 'Deployment', '-judge')!])[0].pod.spec.containers[0].lifecycle;
    const failures = invariantFailures(docs, { taskTimeoutS });
    expect(failures).toContain(`Deployment ci-vcfleet-sandbox: terminationGracePeriodSeconds ${taskTimeoutS} s is less than the drain (${taskTimeoutS} s) plus 30 s to hand rollouts back`);
    expect(failures).toContain('Deployment ci-vcfleet-judge: no preStop drain (node bin/vcfleet-drain.js)');
    // A task limit above the drain the chart was given.
    expect(invariantFailures(await render({ set: [...keySets, 'taskTimeoutS=600'] }), { taskTimeoutS })).toContain(`Deployment ci-vcfleet-sandbox: --drain-grace 600 s is less than task_timeout_s ${taskTimeoutS} s`);
  });

  it('two results writers, a rolling update, no PodDisruptionBudget', async () => {
    const docs = clone(await render({ set: keySets }));
    const results = find(docs, 'Deployment', '-results')!;
    Object.assign(results.spec as object, { replicas: 2, strategy: { type: 'RollingUpdate' } });
    const failures = invariantFailures(docs.filter((d) => d.kind !== 'PodDisruptionBudget'), { taskTimeoutS });
    expect(failures).toContain('results: Deployment ci-vcfleet-results has replicas 2, not 1');
    expect(failures).toContain('results: ci-vcfleet-results is replaced by RollingUpdate, which runs two writers at once; use Recreate');
    expect(failures).toContain('results: no PodDisruptionBudget with maxUnavailable 0 keeps the writer');
  });

  it('a key put in the ConfigMap through extraEnv', async () => {
    const docs = await render({ set: [...keySets, 'extraEnv.OPENAI_API_KEY=sk-judge-CHARTSECRET-2'] });
    const failures = invariantFailures(docs, { taskTimeoutS, secretValues: keyValues });
    expect(failures).toContain('ConfigMap ci-vcfleet-settings: OPENAI_API_KEY looks like a key; keys go in the Secret');
    expect(failures).toContain('ConfigMap ci-vcfleet-settings: OPENAI_API_KEY holds a key given as a secret');
  });

  it('no NetworkPolicy', async () => {
    const failures = invariantFailures(await render({ set: [...keySets, 'networkPolicy.enabled=false'] }), { taskTimeoutS });
    expect(failures).toEqual(['NetworkPolicy: none limits the egress of the sandbox workers', 'NetworkPolicy: none limits the egress of the judge workers']);
  });

  it("an image or a command other than docker-compose.yml's", async () => {
    const failures = invariantFailures(await render({ set: [...keySets, 'image.tag=other'] }), { taskTimeoutS });
    expect(failures).toContain('Deployment ci-vcfleet-judge (judge): image visual-coding-fleet:other, where docker-compose.yml runs visual-coding-fleet:latest');
    const docs = clone(await render({ set: keySets }));
    const sandbox = podTemplates([find(docs, 'Deployment', '-sandbox')!])[0].pod.spec.containers[0];
    sandbox.command![2] = sandbox.command![2].replace('remount,bind,rw', 'remount,rw');
    const results = podTemplates([find(docs, 'Deployment', '-results')!])[0].pod.spec.containers[0];
    results.args = ['worker', 'judge'];
    const broken = invariantFailures(docs, { taskTimeoutS });
    expect(broken.some((f) => f.startsWith("Deployment ci-vcfleet-sandbox (sandbox): command [\"/bin/sh\",\"-c\""))).toBe(true);
    expect(broken).toContain('results: 0 pod templates run the results consumer, not 1');
  });
});
