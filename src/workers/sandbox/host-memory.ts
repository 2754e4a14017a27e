/**
 * What memory this host has for sandboxes, read without side effects: the host's (`/proc/meminfo`)
 * and the smallest limit of the worker's own memory cgroup and its ancestors (an operator's or a
 * container's limit), how much of it is free now, and how much the worker's own cgroup stalls on
 * memory: PSI of its cgroup on v2; on v1, which has no per-cgroup PSI, what the caller's v1 reader
 * says (v1-pressure.ts), never the host-wide PSI file, which counts every sandbox's own thrashing.
 * Admission (admission.ts) counts sandboxes against these.
 */
import path from 'node:path';
import { HOST_CGROUP_PATHS, ownMemoryCgroup, readText, type CgroupPaths } from '../../sandboxes/index.ts';

const MIB = 1024 * 1024;

export interface HostMemory {
  /** What this worker may use in all: the host's memory, or a smaller cgroup limit above the worker. */
  totalMib: number;
  /** Of that, free now: MemAvailable, or the cgroup limit less its usage when that is smaller. */
  availableMib: number;
  /** Where the total comes from, for messages. */
  source: string;
  /** Share of the last 10 s the worker's own cgroup stalled on memory (PSI `some avg10`, or v1's pressure events), in %; null where not reported. */
  pressurePct: number | null;
}

/** Reads the pressure of a cgroup v1 memory folder (the worker's own), in %; null while it cannot tell. */
export type V1PressureReader = (folder: string) => number | null;

/** Where the reader looks; tests point these at a fake tree. */
export interface HostMemoryPaths extends CgroupPaths {
  meminfo: string;
  pressure: string;
}

const HOST_MEMORY_PATHS: HostMemoryPaths = { ...HOST_CGROUP_PATHS, meminfo: '/proc/meminfo', pressure: '/proc/pressure/memory' };

/** A byte count from a cgroup file; null for "max", an absent file, or v1's "no limit" (near 2^63). */
async function bytes(file: string): Promise<number | null> {
  const text = (await readText(file)).trim();
  if (!text || text === 'max') return null;
  const n = Number(text);
  return Number.isFinite(n) && n < 2 ** 60 ? n : null;
}

function meminfoMib(text: string, key: string): number | null {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) / 1024 : null;
}

/** `some avg10` of a PSI file, or null. */
function pressureOf(text: string | null): number | null {
  const m = text ? /^some avg10=([\d.]+)/m.exec(text) : null;
  return m ? Number(m[1]) : null;
}

interface CgroupRoom {
  limitMib: number;
  freeMib: number;
  where: string;
}

/**
 * The worker's own memory cgroup, looked up once per set of paths: admission reads the room before
 * every job, and where the worker sits does not change once it takes jobs (a cgroup v2 worker moves
 * into its leaf when its box is set up, before that).
 */
const ownCgroups = new WeakMap<CgroupPaths, ReturnType<typeof ownMemoryCgroup>>();

function ownCgroup(paths: CgroupPaths): ReturnType<typeof ownMemoryCgroup> {
  let own = ownCgroups.get(paths);
  if (!own) ownCgroups.set(paths, (own = ownMemoryCgroup(paths)));
  return own;
}

/** The tightest memory limit at or above the worker's cgroup, with what is free under it, and where its pressure is read. */
async function cgroupRoom(paths: CgroupPaths): Promise<{ room: CgroupRoom | null; pressureFile: string | null; v1Folder: string | null }> {
  const own = await ownCgroup(paths);
  if (!own) return { room: null, pressureFile: null, v1Folder: null };
  let tightest: CgroupRoom | null = null;
  const [limitFile, usageFile] = own.version === 2 ? ['memory.max', 'memory.current'] : ['memory.limit_in_bytes', 'memory.usage_in_bytes'];
  for (let dir = own.folder; ; dir = path.dirname(dir)) {
    const limit = await bytes(path.join(dir, limitFile));
    const usage = await bytes(path.join(dir, usageFile));
    if (limit !== null) {
      const room = { limitMib: limit / MIB, freeMib: Math.max(0, limit - (usage ?? 0)) / MIB, where: `cgroup ${dir}` };
      if (!tightest || room.freeMib < tightest.freeMib) tightest = room;
    }
    if (dir === own.mountRoot || dir === path.dirname(dir)) break;
  }
  return {
    room: tightest,
    pressureFile: own.version === 2 ? path.join(own.folder, 'memory.pressure') : null,
    v1Folder: own.version === 1 ? own.folder : null,
  };
}

export async function readHostMemory(paths: HostMemoryPaths = HOST_MEMORY_PATHS, v1Pressure?: V1PressureReader): Promise<HostMemory> {
  const meminfo = await readText(paths.meminfo);
  const hostTotal = meminfoMib(meminfo, 'MemTotal') ?? 0;
  const hostAvailable = meminfoMib(meminfo, 'MemAvailable') ?? meminfoMib(meminfo, 'MemFree') ?? 0;
  const { room, pressureFile, v1Folder } = await cgroupRoom(paths);
  const pressurePct =
    v1Folder !== null
      ? (v1Pressure?.(v1Folder) ?? null)
      : (pressureOf(pressureFile ? await readText(pressureFile) : null) ?? pressureOf(await readText(paths.pressure)));
  if (room && room.limitMib < hostTotal) {
    return { totalMib: room.limitMib, availableMib: Math.min(room.freeMib, hostAvailable), source: room.where, pressurePct };
  }
  return { totalMib: hostTotal, availableMib: hostAvailable, source: 'this host (/proc/meminfo)', pressurePct };
}
