/** Load a prepared benchmark (what the producer reads): the manifest and every task, validated. */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { DataError } from '../shared/errors.ts';
import { ManifestSchema, PreparedTaskSchema, type Manifest, type PreparedTask } from '../shared/records/task.ts';
import { MANIFEST_FILE, TASKS_FILE } from './write-prepared.ts';
import { taskIdForJobs } from '../shared/queue/registry.ts';
import { vcfleetCommand } from '../shared/text/advice.ts';

export interface PreparedBenchmark {
  /** Absolute path of `<data_dir>/<benchmark>`. */
  dir: string;
  manifest: Manifest;
  /** Every task, in file order. */
  tasks: PreparedTask[];
  /** Absolute path of a task's image file. */
  imagePath(task: PreparedTask): string;
  /** A task's image bytes, checked against its SHA-256. */
  readImage(task: PreparedTask): Promise<Buffer>;
}

/** Every task's image stays inside the benchmark folder, and no two task ids share a job id. */
function checkTasks(tasks: readonly PreparedTask[], dir: string, file: string): void {
  const jobIds = new Map<string, string>();
  for (const task of tasks) {
    const image = path.resolve(dir, task.image_file);
    if (path.isAbsolute(task.image_file) || !image.startsWith(`${dir}${path.sep}`)) {
      throw new DataError(`${file}: task ${task.task_id} names the image ${task.image_file}, outside ${dir}; prepare the benchmark again`);
    }
    const key = taskIdForJobs(task.task_id);
    const other = jobIds.get(key);
    if (other !== undefined) throw new DataError(`${file}: tasks ${other} and ${task.task_id} give the same job id (${key}); prepare the benchmark again`);
    jobIds.set(key, task.task_id);
  }
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
      `benchmark ${benchmark} is not prepared in ${dir} (no valid manifest.json); run \`${vcfleetCommand(`prepare --benchmark ${benchmark}`)}\` first`,
    );
  }
  const { prompt_version: _ignored, ...plain } = manifest;
  const file = path.join(dir, TASKS_FILE);
  const text = await readFile(file, 'utf8').catch(() => {
    throw new DataError(`${file} is missing; run \`${vcfleetCommand(`prepare --benchmark ${benchmark}`)}\` again`);
  });
  const tasks = parseTasksJsonl(text, file);
  if (tasks.length !== manifest.num_tasks) {
    throw new DataError(`${file} holds ${tasks.length} tasks but its manifest says ${manifest.num_tasks}; prepare again`);
  }
  checkTasks(tasks, dir, file);
  const imagePath = (task: PreparedTask) => path.join(dir, task.image_file);
  const readImage = async (task: PreparedTask) => {
    const bytes = await readFile(imagePath(task)).catch((err: NodeJS.ErrnoException) => {
      throw new DataError(`cannot read the image of task ${task.task_id} (${imagePath(task)}: ${err.code ?? err.message}); prepare the benchmark again`);
    });
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (sha !== task.image_sha256) throw new DataError(`the image of task ${task.task_id} (${imagePath(task)}) has SHA-256 ${sha}, not ${task.image_sha256}: it changed after prepare; prepare the benchmark again`);
    return bytes;
  };
  return { dir, manifest: plain, tasks, imagePath, readImage };
}
