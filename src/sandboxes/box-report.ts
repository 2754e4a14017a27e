/**
 * Reading what a sandbox provider enforces (BoxReport) and what a sandbox ran into (LimitHits).
 */
import type { BoxReport, BoxResource, LimitHits, SandboxResources } from './types.ts';

export const BOX_RESOURCES: readonly BoxResource[] = ['memory', 'pids', 'cpu', 'disk', 'seccomp', 'user'];

/** A report where every item has the same status and detail (e.g. a provider with the box turned off). */
export function uniformReport(enforced: boolean, detail: string): BoxReport {
  return Object.fromEntries(BOX_RESOURCES.map((r) => [r, { enforced, detail }])) as BoxReport;
}

/** The items of `report` that are not enforced, as `name (why)` strings. */
export function unenforced(report: BoxReport): string[] {
  return BOX_RESOURCES.filter((r) => !report[r].enforced).map((r) => `${r} (${report[r].detail})`);
}

/**
 * One sentence naming the first limit the sandbox hit (memory, then pids, then disk), e.g.
 * "the sandbox hit its 2048 MiB memory limit"; null when it hit none.
 */
export function describeLimitHit(hits: LimitHits, resources: SandboxResources): string | null {
  if ((hits.memory ?? 0) > 0) return `the sandbox hit its ${resources.memory_mib} MiB memory limit`;
  if ((hits.pids ?? 0) > 0) return `the sandbox hit its ${resources.pids}-process limit`;
  if ((hits.disk ?? 0) > 0) return `the sandbox hit its ${resources.disk_mib} MiB disk limit`;
  return null;
}
