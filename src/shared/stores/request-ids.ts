/**
 * Who a `vcfleet serve` rollout id was accepted for (its weight version and its row's fingerprint), decided
 * in one step in Redis: a request of an id either claims it, or finds it claimed for the same identity
 * (and attaches to that rollout), or finds another identity (409). Concurrent requests of one id cannot
 * both pass a check made before either wrote (a Lua script runs alone), and the task record is kept only
 * under the identity that holds the id, so the record, the job and the claim always agree.
 */
import type { Redis } from 'ioredis';
import { fleetKeys, type FleetKeys } from '../redis/keys.ts';

/** KEYS: ids hash, enqueued set. ARGV: rollout id, identity. Returns {outcome, held identity, newly named}. */
const CLAIM = `
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and held ~= ARGV[2] then return {'other', held, 0} end
if not held then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local named = redis.call('SADD', KEYS[2], ARGV[1])
if held then return {'same', held, named} end
return {'claimed', ARGV[2], named}
`;

/** KEYS: ids hash, task key. ARGV: rollout id, identity, record. 1 kept, 0 there was one, -1 the id is not (or no longer) this identity's. */
const KEEP = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return -1 end
if redis.call('SET', KEYS[2], ARGV[3], 'NX') then return 1 end
return 0
`;

/** KEYS: ids hash, task key, enqueued set. ARGV: rollout id, identity, '1' to unname. Lets go of a claim that made nothing (no task record). */
const RELEASE = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if ARGV[3] == '1' then redis.call('SREM', KEYS[3], ARGV[1]) end
return 1
`;

export interface RequestIdentity {
  weightVersion: string | null;
  fingerprint: string;
}

export type Claim =
  /** The id is this identity's: `named` when this request put the rollout in the run's enqueued set. */
  | { outcome: 'claimed' | 'same'; named: boolean }
  /** The id was accepted for another identity. */
  | { outcome: 'other'; held: RequestIdentity };

const encode = (id: RequestIdentity) => JSON.stringify([id.weightVersion, id.fingerprint]);
function decode(text: string): RequestIdentity {
  const [weightVersion, fingerprint] = JSON.parse(text) as [string | null, string];
  return { weightVersion, fingerprint };
}

export class RequestIds {
  readonly keys: FleetKeys;

  constructor(readonly redis: Redis, prefix: string) {
    this.keys = fleetKeys(prefix);
  }

  /** Claim a rollout id for an identity, or learn whose it is; also names the rollout in the run's enqueued set. */
  async claim(runId: string, rolloutId: string, identity: RequestIdentity): Promise<Claim> {
    const [outcome, held, named] = (await this.redis.eval(CLAIM, 2, this.keys.requestIds(runId), this.keys.enqueued(runId), rolloutId, encode(identity))) as [string, string, number];
    if (outcome === 'other') return { outcome, held: decode(held) };
    return { outcome: outcome as 'claimed' | 'same', named: named === 1 };
  }

  /** Keep the task record under the identity that holds the id: 'kept', 'exists' (kept before), or 'lost' (the claim was let go meanwhile). */
  async keepTask(runId: string, rolloutId: string, identity: RequestIdentity, record: Buffer): Promise<'kept' | 'exists' | 'lost'> {
    const k = this.keys;
    const r = (await this.redis.eval(KEEP, 2, k.requestIds(runId), k.requestTask(runId, rolloutId), rolloutId, encode(identity), record)) as number;
    return r === 1 ? 'kept' : r === 0 ? 'exists' : 'lost';
  }

  /**
   * Let go of a claim whose request made nothing (refused by the bound, or failed): the id is free again,
   * and out of the enqueued set when `unname` (this request named it).
   */
  async release(runId: string, rolloutId: string, identity: RequestIdentity, unname: boolean): Promise<boolean> {
    const k = this.keys;
    return (await this.redis.eval(RELEASE, 3, k.requestIds(runId), k.requestTask(runId, rolloutId), k.enqueued(runId), rolloutId, encode(identity), unname ? '1' : '0')) === 1;
  }
}
