/**
 * Small pure pieces of the `opensandbox` provider: the metadata that labels a remote sandbox with the
 * worker that owns it (so a later worker of the same host can reap it), the egress policy, and POSIX
 * shell quoting for execd's `bash -c`.
 */
import os from 'node:os';
import { bootId, identityOf, type ProcessIdentity } from '../proc-tree.ts';

/** Default value of the fleet label put on every sandbox. */
export const DEFAULT_FLEET_LABEL = 'visual-coding-fleet';

/** The metadata keys of a sandbox: its fleet and label, and the process that owns it (host, pid, its start time, the host's boot). */
export const META = {
  fleet: 'vcfleet-fleet', label: 'vcfleet-label',
  host: 'vcfleet-host', pid: 'vcfleet-owner-pid', start: 'vcfleet-owner-start', boot: 'vcfleet-boot',
} as const;

/** Metadata values in the conservative label charset: `[A-Za-z0-9._-]`, at most 63, alphanumeric ends. */
export function labelValue(value: string): string {
  const cleaned = value.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 63);
  return cleaned.replace(/^[^A-Za-z0-9]+/, '').replace(/[^A-Za-z0-9]+$/, '') || 'x';
}

/** Labels naming the fleet, this host and this worker process (pid, start time, boot). */
export function ownerMetadata(fleet: string, label: string): Record<string, string> {
  const me = identityOf(process.pid);
  return {
    [META.fleet]: labelValue(fleet),
    [META.host]: labelValue(os.hostname()),
    [META.pid]: String(process.pid),
    [META.start]: String(me?.startTime ?? 0),
    [META.boot]: labelValue(bootId()),
    [META.label]: labelValue(label),
  };
}

/** The owner recorded in a sandbox's metadata, or null when it carries none. */
export function ownerFromMetadata(meta: Record<string, string> | undefined): ProcessIdentity | null {
  if (!meta?.[META.pid] || !meta[META.start]) return null;
  return {
    pid: Number(meta[META.pid]),
    startTime: Number(meta[META.start]),
    bootId: meta[META.boot] ?? '',
    hostname: meta[META.host] ?? '',
  };
}

/** `model_only`: deny all egress but the gateway's host. */
export function modelOnlyPolicy(gatewayUrl: string): {
  defaultAction: 'deny';
  egress: { action: 'allow'; target: string }[];
} {
  return { defaultAction: 'deny', egress: [{ action: 'allow', target: new URL(gatewayUrl).hostname }] };
}

/** Quotes one word for a POSIX shell. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** An argv as one shell command line, with no interpolation of its words. */
export function shellJoin(argv: readonly string[]): string {
  return argv.map(shellQuote).join(' ');
}
