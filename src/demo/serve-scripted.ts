/**
 * The demo's scripted servers and puzzles for a fleet whose roles run apart (the compose CI run,
 * .ci/compose.ci.yml), where `vcfleet demo` runs them in-process on loopback:
 *
 *   node bin/run-ts.js src/demo/serve-scripted.ts policy [--host 0.0.0.0] [--port 8000] [--model scripted-demo-vlm]
 *   node bin/run-ts.js src/demo/serve-scripted.ts judge [--host 0.0.0.0] [--port 8001]
 *   node bin/run-ts.js src/demo/serve-scripted.ts benchmark [--data-dir data] [--benchmark babyvision_opencode]
 *
 * `policy` answers the demo puzzles as in `vcfleet demo` (one Python call on the image, then the
 * answer of demoAnswers); `judge` grades by default; both serve until SIGTERM or SIGINT. They keep
 * every request in memory, as in tests: stand-ins for a CI run, not servers to leave running.
 * `benchmark` writes the demo puzzles as the prepared benchmark `<data-dir>/<benchmark>`, which
 * `vcfleet produce` then enqueues (it reuses a preparation when no parquet is configured).
 */
import { parseArgs } from 'node:util';
import { BENCHMARKS, type BenchmarkName } from '../shared/config/load.ts';
import { demoAnswers, demoPuzzles, writeDemoBenchmark } from './puzzles.ts';
import { startScriptedJudgeServer } from './scripted-judge-server.ts';
import { startScriptedPolicyServer } from './scripted-policy-server.ts';
import { scripts } from './scripted-policy-scripts.ts';

const USAGE = 'usage: serve-scripted.ts policy|judge [--host H] [--port N] [--model NAME] | benchmark [--data-dir DIR] [--benchmark NAME]';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    host: { type: 'string', default: '0.0.0.0' },
    port: { type: 'string' },
    model: { type: 'string', default: 'scripted-demo-vlm' },
    'data-dir': { type: 'string', default: 'data' },
    benchmark: { type: 'string', default: 'babyvision_opencode' },
  },
});

function fail(message: string): never {
  process.stderr.write(`serve-scripted: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function port(fallback: number): number {
  const n = Number(values.port ?? fallback);
  return Number.isInteger(n) && n >= 0 && n <= 65535 ? n : fail(`--port must be a port number, not "${values.port}"`);
}

/** Serve until SIGTERM or SIGINT, then close (dropping open connections) and exit. */
function serveUntilStopped(what: string, server: { url: string; close(): Promise<void> }): void {
  process.stderr.write(`${what} listening on ${server.url}\n`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

const mode = positionals[0];
if (positionals.length !== 1) fail('name one mode');
if (mode === 'policy') {
  const script = scripts.demo(demoAnswers(demoPuzzles()));
  serveUntilStopped(`scripted policy (model ${values.model})`, await startScriptedPolicyServer({ script, modelName: values.model, host: values.host, port: port(8000) }));
} else if (mode === 'judge') {
  serveUntilStopped('scripted judge', await startScriptedJudgeServer({ host: values.host, port: port(8001) }));
} else if (mode === 'benchmark') {
  const benchmark = values.benchmark as BenchmarkName;
  if (!BENCHMARKS.includes(benchmark)) fail(`--benchmark must be one of ${BENCHMARKS.join(', ')}`);
  const puzzles = demoPuzzles();
  await writeDemoBenchmark(values['data-dir'], benchmark, puzzles);
  process.stdout.write(`wrote the ${puzzles.length} demo puzzles as the prepared benchmark ${values['data-dir']}/${benchmark}\n`);
} else {
  fail(`unknown mode "${mode}"`);
}
