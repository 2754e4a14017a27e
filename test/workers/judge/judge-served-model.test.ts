/**
 * The judge model is recorded as the judge server reports it: a local judge that serves another model
 * than the run names grades rows that say so (also when a verdict comes back from the cache); the
 * `JUDGE_MODEL` variable names the judge model beside `JUDGE_BASE_URL`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAll } from '../../../src/all-in-one/run-all.ts';
import { createScriptedAgent } from '../../../src/agent/scripted-agent.ts';
import { loadConfig } from '../../../src/shared/config/load.ts';
import { RowSchema } from '../../../src/shared/records/rows.ts';
import { makeFleetEnv, type FleetEnv } from '../../helpers/fleet.ts';
import { removeTmpDirs } from '../../helpers/tmp.ts';

const SERVED = 'local-judge-7b-q4';
let server: http.Server;
let url: string;
let calls = 0;

beforeAll(async () => {
  // An OpenAI-compatible judge that serves its own model whatever it is asked for (as llama.cpp's server may).
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        id: `c${calls}`, object: 'chat.completion', created: 0, model: SERVED,
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"verdict": "equivalent", "reason": "same"}' } }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('the judge model as its server reports it', () => {
  let env: FleetEnv;
  afterEach(async () => {
    await env?.cleanup();
    removeTmpDirs();
  });

  it('is the judge_model of every row it graded, from a call or from the cache', async () => {
    env = await makeFleetEnv({ rows: 2, judgeUrl: url, overrides: ['++preflight.enabled=false', '++num_repeats=2', '++judge.concurrency=1'] });
    const agent = createScriptedAgent({ '*': { answer: '@gold' } });
    const result = await runAll({ config: env.config(['++run_id=served']), logger: env.logger, agent, progress: { update() {}, stop() {} } });
    expect(result.status).toBe('complete');
    const rows = readFileSync(env.output, 'utf8').trim().split('\n').map((l) => RowSchema.parse(JSON.parse(l)));
    expect(rows).toHaveLength(4);
    expect(rows.filter((r) => r.judge_cached)).toHaveLength(2); // each task's second repeat
    expect(rows.map((r) => r.judge_model)).toEqual([SERVED, SERVED, SERVED, SERVED]);
  }, 60_000);

  it('JUDGE_MODEL names the judge model beside JUDGE_BASE_URL', () => {
    const config = loadConfig({ env: { JUDGE_MODEL: 'qwen2.5-7b-instruct', JUDGE_BASE_URL: 'http://127.0.0.1:9/v1' }, overrides: [] });
    expect(config.visual_coding_opencode_judge_model_name).toBe('qwen2.5-7b-instruct');
    expect(config.visual_coding_opencode_judge_base_url).toBe('http://127.0.0.1:9/v1');
    expect(loadConfig({ env: {}, overrides: [] }).visual_coding_opencode_judge_model_name).toBe('gpt-4o-mini');
  });
});
