/**
 * The KEDA triggers of the chart name what the fleet exports: a live `vcfleet worker` on a fresh
 * key prefix, with a run waiting in its queues, is scraped, and the PromQL of every rendered
 * ScaledObject and ScaledJob is evaluated over the scraped series (its label matchers and its
 * aggregation): each finds its series, and the sandbox trigger counts the rollouts that wait.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { produceRun } from '../../src/producer/produce.ts';
import { loadOrPrepare } from '../../src/prepare/load-or-prepare.ts';
import { freePort } from '../../src/all-in-one/private-redis.ts';
import { createRedis } from '../../src/shared/redis/connect.ts';
import { useScriptedJudge } from '../helpers/scripted-judge-server.ts';
import { makeFleetEnv, REDIS_URL, startCli, waitFor, type CliProcess, type FleetEnv } from '../helpers/fleet.ts';
import { removeTmpDirs } from '../helpers/tmp.ts';
import { render, type Doc } from '../helpers/helm.ts';

const judge = useScriptedJudge();
const ROWS = 5;
let env: FleetEnv;
let worker: CliProcess;
let metricsText = '';

interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format → series. */
function parseMetrics(text: string): Series[] {
  return text.split('\n').flatMap((line) => {
    const m = /^([A-Za-z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (!m) return [];
    return [{ name: m[1], labels: Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]])), value: Number(m[3]) }];
  });
}

/** The series a selector `name{label="v", label=~"a|b", …}` picks (the matchers PromQL has: = != =~ !~, regexes anchored). */
function select(series: Series[], selector: string): Series[] {
  const m = /^([A-Za-z_:][\w:]*)\{([^}]*)\}$/.exec(selector.trim());
  if (!m) throw new Error(`not a selector: ${selector}`);
  const matchers = [...m[2].matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map(([, label, op, v]) => ({ label, op, v }));
  return series.filter((s) => s.name === m[1] && matchers.every(({ label, op, v }) => {
    const have = s.labels[label] ?? '';
    const re = new RegExp(`^(?:${v})$`);
    return op === '=' ? have === v : op === '!=' ? have !== v : op === '=~' ? re.test(have) : !re.test(have);
  }));
}

/** The chart's query shape, `sum(max by (L…) (SELECTOR))`, evaluated: its value and the series it read. */
function evaluate(query: string, series: Series[]): { value: number; picked: Series[] } {
  const m = /^sum\(max by \(([\w, ]+)\) \((.+)\)\)$/.exec(query);
  if (!m) throw new Error(`the query is not sum(max by (…) (selector)): ${query}`);
  const by = m[1].split(',').map((l) => l.trim());
  const picked = select(series, m[2]);
  const groups = new Map<string, number>();
  for (const s of picked) {
    const key = by.map((l) => s.labels[l]).join('\0');
    groups.set(key, Math.max(groups.get(key) ?? -Infinity, s.value));
  }
  return { value: [...groups.values()].reduce((a, b) => a + b, 0), picked };
}

function triggersOf(docs: Doc[]): Array<{ name: string; query: string }> {
  return docs
    .filter((d) => d.kind === 'ScaledObject' || d.kind === 'ScaledJob')
    .flatMap((d) => (d.spec as { triggers: Array<{ type: string; metadata: { query: string } }> }).triggers.map((t) => {
      expect(t.type).toBe('prometheus');
      return { name: `${d.kind}/${d.metadata.name}`, query: t.metadata.query };
    }));
}

beforeAll(async () => {
  env = await makeFleetEnv({ rows: ROWS, judgeUrl: judge.url, overrides: ['++run_id=keda'] });
  const client = createRedis(REDIS_URL, 'client');
  const bench = await loadOrPrepare(env.config(), env.logger);
  await produceRun({ config: env.config(), redis: client, logger: env.logger, tasks: bench.tasks, readImage: bench.readImage });
  client.disconnect();
  // The results role: it serves the fleet's /metrics like every role, and takes no rollout.
  const port = await freePort();
  worker = startCli(['worker', 'results', ...env.overrides, `++metrics_server.port=${port}`, '++metrics_server.host=127.0.0.1']);
  metricsText = await waitFor('the worker serving queue depths', async () => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => '');
    return text.includes('vcfleet_queue_jobs{') ? text : undefined;
  }, 60_000, 200);
}, 120_000);

afterAll(async () => {
  if (worker && worker.child.exitCode === null) {
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
  await env?.cleanup();
  removeTmpDirs();
});

describe("the KEDA triggers' PromQL against a live worker's /metrics", () => {
  for (const mode of ['scaledObject', 'scaledJob']) {
    it(`${mode}: every trigger finds its series; the sandbox trigger counts the ${ROWS} waiting rollouts`, async () => {
      const docs = await render({ set: ['keda.enabled=true', `keda.sandboxMode=${mode}`, 'sandbox.provider=opensandbox', 'sandbox.opensandbox.domain=os:8080'], setString: [`prefix=${env.prefix}`] });
      const triggers = triggersOf(docs);
      expect(triggers.map((t) => t.name).sort()).toEqual([`${mode === 'scaledJob' ? 'ScaledJob' : 'ScaledObject'}/ci-vcfleet-sandbox`, 'ScaledObject/ci-vcfleet-judge'].sort());
      const series = parseMetrics(metricsText);
      for (const t of triggers) {
        const { value, picked } = evaluate(t.query, series);
        // Both states the trigger counts are exported (a name or label the fleet does not export picks nothing).
        expect(picked.map((s) => s.labels.state).sort(), `${t.name}: ${t.query}`).toEqual(['prioritized', 'waiting']);
        expect(value, t.name).toBe(t.name.endsWith('-sandbox') ? ROWS : 0);
      }
    });
  }

  it('picks nothing under another prefix or a label the fleet does not export (the check can fail)', async () => {
    const series = parseMetrics(metricsText);
    const other = triggersOf(await render({ set: ['keda.enabled=true'], setString: ['prefix=another-fleet'] }))[0];
    expect(evaluate(other.query, series).picked).toEqual([]);
    const [sandbox] = triggersOf(await render({ set: ['keda.enabled=true'], setString: [`prefix=${env.prefix}`] }));
    expect(evaluate(sandbox.query.replace('queue="rollout"', 'queue="rollouts"'), series).picked).toEqual([]);
    expect(evaluate(sandbox.query.replace('prefix=', 'key_prefix='), series).picked).toEqual([]);
  });
});
