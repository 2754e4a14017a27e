/**
 * `prepareBenchmark` in its own process, so that its peak RSS is its own. Arguments:
 * `prepare <parquet> <data_dir>` or `baseline` (the same modules loaded, nothing prepared).
 * Sends { seconds, maxRss, vmHwm, tasks } over IPC; sizes in bytes.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../../src/shared/config/load.ts';
import { prepareBenchmark } from '../../src/prepare/prepare.ts';
import { discardLogger } from '../lib/fleet.ts';

export interface PrepareSample {
  seconds: number;
  /** process.resourceUsage().maxRSS, in bytes. */
  maxRss: number;
  /** VmHWM of /proc/self/status, in bytes. */
  vmHwm: number;
  tasks: number;
}

function vmHwm(): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return kb ? Number(kb) * 1024 : Number.NaN;
}

const [mode, parquet, dataDir] = process.argv.slice(2);
let seconds = 0;
let tasks = 0;
if (mode === 'prepare') {
  const config = loadConfig({ env: {}, overrides: [`++babyvision_parquet=${parquet}`, `++data_dir=${dataDir}`, '++reuse_existing_data_preparation=false'] });
  const t = performance.now();
  const result = await prepareBenchmark(config, { benchmark: 'babyvision_opencode', logger: discardLogger('info'), stderr: { write: () => true } });
  seconds = (performance.now() - t) / 1000;
  tasks = result.manifest.num_tasks;
}
const sample: PrepareSample = { seconds, maxRss: process.resourceUsage().maxRSS * 1024, vmHwm: vmHwm(), tasks };
process.send!(sample);
process.disconnect();
