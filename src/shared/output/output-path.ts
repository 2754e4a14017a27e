/**
 * Where the results host writes a run's output. The run record names a path (the producer's
 * string); this host decides whether to honour it: a path its own configuration names
 * (`output_jsonl_fpath`), or one inside its own output root (`output_root`, default its working
 * folder). Anything else (`/etc/...`, `../../x`) is refused, naming both, and the rows wait in Redis.
 */
import path from 'node:path';
import type { Config } from '../config/load.ts';
import { InfraError } from '../errors.ts';

export type OutputHostSettings = Pick<Config, 'output_root' | 'output_jsonl_fpath'>;

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : `${root}${path.sep}`);
}

/** The absolute path of a run's JSONL on this host. Throws InfraError when this host refuses it. */
export function resolveOutputPath(runId: string, runPath: string, host: OutputHostSettings): string {
  const root = path.resolve(host.output_root ?? '.');
  if (host.output_jsonl_fpath !== null && path.resolve(root, host.output_jsonl_fpath) === path.resolve(root, runPath)) {
    return path.resolve(root, runPath);
  }
  const wanted = path.resolve(root, runPath);
  if (!runPath.endsWith('.jsonl')) {
    throw new InfraError(`run ${runId} asks for its output at ${runPath}, which does not end in .jsonl: produce it again with ++output_jsonl_fpath=NAME.jsonl`);
  }
  if (inside(root, wanted)) return wanted;
  throw new InfraError(
    `run ${runId} asks for its output at ${wanted}, outside this results host's output root ${root}: ` +
      `set output_root (VCFLEET_OUTPUT_ROOT) on this host to a folder that holds it, or produce the run with a relative output_jsonl_fpath`,
  );
}
