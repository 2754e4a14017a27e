/** Finding the output JSONL to view when none is named: the most recently modified one under a folder. */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** How deep below the folder to look (`results/<name>/<file>.jsonl` is found; deeper is not). */
const MAX_DEPTH = 3;

/**
 * The most recently modified `*.jsonl` under `dir` (transcript folders skipped), or null when there
 * is none or `dir` does not exist.
 */
export function newestJsonl(dir: string): string | null {
  const found: Array<{ file: string; mtimeMs: number }> = [];
  const walk = (folder: string, depth: number) => {
    let entries;
    try {
      entries = readdirSync(folder, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = path.join(folder, e.name);
      if (e.isDirectory() && depth < MAX_DEPTH && !e.name.endsWith('_transcripts')) walk(full, depth + 1);
      else if (e.isFile() && e.name.endsWith('.jsonl')) found.push({ file: full, mtimeMs: statSync(full).mtimeMs });
    }
  };
  walk(dir, 1);
  found.sort((a, b) => b.mtimeMs - a.mtimeMs || a.file.localeCompare(b.file));
  return found[0]?.file ?? null;
}
