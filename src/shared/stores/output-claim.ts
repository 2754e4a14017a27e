/**
 * One live run per output file: a run claims the absolute path of its JSONL in Redis (its run id,
 * host and pid) before anything is produced, refreshes the claim while it lives, and drops it at
 * the end. A second run that names the same file is refused at start, naming the run that writes it,
 * instead of both appending to one JSONL while the metrics file keeps only the last. The claim has a
 * lease (`ttlMs`): a run that died without dropping it blocks the file for one lease at most.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { fleetKeys } from '../redis/keys.ts';
import { ConfigError } from '../errors.ts';
import type { Logger } from '../logger.ts';

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** Who holds a claim, as stored. */
export interface ClaimHolder {
  run_id: string;
  host: string;
  pid: number;
  token: string;
}

export interface OutputClaimOptions {
  redis: Redis;
  prefix: string;
  /** The absolute path of the run's JSONL on this host. */
  file: string;
  runId: string;
  /** The files that go with the JSONL (its metrics file), named in the refusal. */
  companions?: readonly string[];
  /** A `++output_jsonl_fpath=…` the refusal suggests (pasteable). */
  otherOutput: string;
  logger: Logger;
  /** Lease in milliseconds, renewed every third of it. Default 30000. */
  ttlMs?: number;
}

export interface OutputClaim {
  /** Drop the claim (only if still ours). Safe to call twice. */
  release(): Promise<void>;
}

function parseHolder(raw: string | null): ClaimHolder | null {
  if (raw === null) return null;
  try {
    return JSON.parse(raw) as ClaimHolder;
  } catch {
    return { run_id: '?', host: '?', pid: 0, token: raw };
  }
}

/**
 * Claim `file` for `runId`, or throw a ConfigError naming the live run that writes it and what to do.
 * A claim of the same run id (a resume after a crash, within the lease) is taken over.
 */
export async function claimOutput(o: OutputClaimOptions): Promise<OutputClaim> {
  const key = fleetKeys(o.prefix).outputClaim(o.file);
  const ttlMs = o.ttlMs ?? 30_000;
  const holder: ClaimHolder = { run_id: o.runId, host: hostname(), pid: process.pid, token: randomUUID() };
  const value = JSON.stringify(holder);
  if ((await o.redis.set(key, value, 'PX', ttlMs, 'NX')) !== 'OK') {
    const other = parseHolder(await o.redis.get(key));
    if (other && other.run_id !== o.runId) {
      const files = [o.file, ...(o.companions ?? [])].join(' and ');
      throw new ConfigError(
        `run ${other.run_id} (pid ${other.pid} on ${other.host}) is writing ${files}: give this run another output, ` +
          `for example ${o.otherOutput}, or wait for run ${other.run_id} to end (or stop it with Ctrl-C in its terminal) and start this one again`,
      );
    }
    // Ours (same run), or gone between the two reads: take it.
    await o.redis.set(key, value, 'PX', ttlMs);
  }
  const timer = setInterval(() => {
    o.redis.eval(RENEW, 1, key, value, String(ttlMs)).catch((err: Error) => o.logger.warn({ err: err.message, file: o.file }, 'cannot refresh the claim of the output file (Redis unreachable?)'));
  }, Math.max(1, Math.floor(ttlMs / 3)));
  timer.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      await o.redis.eval(RELEASE, 1, key, value).catch(() => undefined); // the lease ends it anyway
    },
  };
}
