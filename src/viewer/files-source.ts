/**
 * A `ViewerSource` over several output JSONL files (`vcfleet view A.jsonl B.jsonl`): the runs of them
 * all, so that the compare page can pair two runs written to two files. A run id held by more than
 * one file is served from the first file named.
 */
import { createFileSource } from './file-source.ts';
import type { RunListEntry, ViewerSource } from './source.ts';

export function createFilesSource(jsonlPaths: readonly string[]): ViewerSource {
  const sources = jsonlPaths.map((p) => createFileSource(p));
  if (sources.length === 1) return sources[0];
  /** The source that serves a run id: the first that holds it. */
  async function holder(runId: string): Promise<ViewerSource | null> {
    for (const source of sources) if ((await source.runs()).some((r) => r.run_id === runId)) return source;
    return null;
  }
  return {
    async runs() {
      const seen = new Set<string>();
      const all: RunListEntry[] = [];
      for (const source of sources) {
        for (const run of await source.runs()) {
          if (seen.has(run.run_id)) continue;
          seen.add(run.run_id);
          all.push(run);
        }
      }
      return all.sort((a, b) => b.last_finished_at.localeCompare(a.last_finished_at));
    },
    async run(runId) {
      return (await holder(runId))?.run(runId) ?? null;
    },
    async rollout(runId, rolloutId) {
      return (await holder(runId))?.rollout(runId, rolloutId) ?? null;
    },
    async image(sha256) {
      for (const source of sources) {
        const bytes = await source.image(sha256);
        if (bytes) return bytes;
      }
      return null;
    },
  };
}
