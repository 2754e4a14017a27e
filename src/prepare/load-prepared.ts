/** Load a prepared benchmark (what the producer reads): the manifest and every task, validated. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { DataError } from '../shared/errors.ts';
import { ManifestSchema, PreparedTaskSchema, type Manifest, type PreparedTask } from '../shared/task.ts';
import { MANIFEST_FILE, TASKS_FILE } from './write-prepared.ts';

export interface PreparedBenchmark {
  /** Absolute path of `<data_dir>/<benchmark>`. */
  dir: string;
  manifest: Manifest;
  /** Every task, in file order. */
  tasks: PreparedTask[];
  /** Absolute path of a task's image file. */
  imagePath(task: PreparedTask): string;
}

/** The manifest of a complete preparation in `dir`, or null when there is none (or it is unreadable). */
export async function readManifest(dir: string): Promise<(Manifest & { prompt_version?: unknown }) | null> {
  let text: string;
  try {
    text = await readFile(path.join(dir, MANIFEST_FILE), 'utf8');
  } catch {
    return null;
  }
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    const parsed = ManifestSchema.safeParse(raw);
    return parsed.success ? { ...parsed.data, prompt_version: raw.prompt_version } : null;
  } catch {
    return null;
  }
}

/** Parse `tasks.jsonl`; throws DataError naming the file and the 1-based line of the first bad task. */
export function parseTasksJsonl(text: string, file: string): PreparedTask[] {
  const tasks: PreparedTask[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '') continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      throw new DataError(`${file} line ${i + 1} is not valid JSON (${(err as Error).message})`);
    }
    const parsed = PreparedTaskSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new DataError(`${file} line ${i + 1} is not a valid task: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
    }
    tasks.push(parsed.data);
  }
  return tasks;
}

/**
 * Load `<dataDir>/<benchmark>`. Throws DataError when it was never (completely) prepared, or when
 * a task line is invalid or the task count disagrees with the manifest.
 */
export async function loadPreparedBenchmark(dataDir: string, benchmark: string): Promise<PreparedBenchmark> {
  const dir = path.resolve(dataDir, benchmark);
  const manifest = await readManifest(dir);
  if (!manifest) {
    throw new DataError(
      `benchmark ${benchmark} is not prepared in ${dir} (no valid manifest.json); run \`vcfleet prepare --benchmark ${benchmark}\` first`,
    );
  }
  const { prompt_version: _ignored, ...plain } = manifest;
  const file = path.join(dir, TASKS_FILE);
  const text = await readFile(file, 'utf8').catch(() => {
    throw new DataError(`${file} is missing; run \`vcfleet prepare --benchmark ${benchmark}\` again`);
  });
  const tasks = parseTasksJsonl(text, file);
  if (tasks.length !== manifest.num_tasks) {
    throw new DataError(`${file} holds ${tasks.length} tasks but its manifest says ${manifest.num_tasks}; prepare again`);
  }
  return { dir, manifest: plain, tasks, imagePath: (task) => path.join(dir, task.image_file) };
}
