/**
 * A fleet-wide pace of calls to one endpoint, kept in Redis so every worker shares it (the judge's
 * pace is BullMQ's limiter on its jobs, workers/judge/limiter.ts; a policy call is not a job, so its
 * pace is kept here, in one hash per endpoint, changed only by one script at a time).
 *
 * Three limits, each a token bucket on Redis's own clock (so workers on hosts whose clocks differ
 * agree): the configured calls per minute and tokens per minute (either may be absent), and an
 * adaptive rate learnt from the endpoint's own 429s (additive increase per clean call,
 * multiplicative decrease per push-back, at most once per wait the server asked for). A push-back
 * also holds every call of the endpoint until the wait it named is over. A call's tokens are
 * estimated when it is let through and corrected once its usage is known.
 */
import type { Redis } from 'ioredis';

/** Seconds of a configured rate a bucket holds (its burst). */
const BURST_S = 2;
/** Seconds of a configured token rate the token bucket holds. */
const TOKEN_BURST_S = 10;
/** The adaptive rate never falls below this, in calls per minute. */
const MIN_RATE_PER_MIN = 1;
/** Each clean call raises the adaptive rate by this share of itself (at least 1 call per minute). */
const INCREASE_SHARE = 0.02;
/** A push-back multiplies the adaptive rate by this. */
const DECREASE = 0.8;

// Fields: r, k (request and token levels), a (adaptive level), ar (adaptive rate, calls/ms; 0: none
// learnt yet), ts (last update), until (held until), dec (last decrease), n/nts (calls let through
// in the current 10 s window, and its start), ok (of them, answered clean), pn/pok/pd (the previous
// window's counts and length).
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rr, rcap, kr, kcap, cost, ttl, adapt = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1'
local h = redis.call('HMGET', KEYS[1], 'r', 'k', 'a', 'ar', 'ts', 'until', 'n', 'nts')
local ts = tonumber(h[5]) or now
local el = math.max(0, now - ts)
local wait = 0
local untilv = tonumber(h[6]) or 0
if untilv > now then wait = untilv - now end
local r = 0
if rr > 0 then
  r = math.min(rcap, (tonumber(h[1]) or rcap) + el * rr)
  if r < 1 then wait = math.max(wait, (1 - r) / rr) end
end
local k = 0
if kr > 0 then
  cost = math.min(cost, kcap)
  k = math.min(kcap, (tonumber(h[2]) or kcap) + el * kr)
  if k < cost then wait = math.max(wait, (cost - k) / kr) end
end
local ar = tonumber(h[4]) or 0
local a = 0
if adapt and ar > 0 then
  local acap = math.max(1, ar * 2000)
  a = math.min(acap, (tonumber(h[3]) or acap) + el * ar)
  if a < 1 then wait = math.max(wait, (1 - a) / ar) end
end
local n, nts = tonumber(h[7]) or 0, tonumber(h[8]) or now
if wait <= 0 then
  r = r - 1
  k = k - cost
  a = a - 1
  if now - nts > 10000 then
    redis.call('HSET', KEYS[1], 'pn', n, 'pok', tonumber(redis.call('HGET', KEYS[1], 'ok') or '0'), 'pd', now - nts, 'ok', 0)
    n, nts = 0, now
  end
  n = n + 1
end
redis.call('HSET', KEYS[1], 'r', r, 'k', k, 'a', a, 'ts', now, 'n', n, 'nts', nts)
redis.call('PEXPIRE', KEYS[1], ttl)
return math.ceil(wait)
`;

// ARGV: held ms the server asked for, whether to adapt, the TTL.
const PUSHBACK = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold, adapt, ttl = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])
local h = redis.call('HMGET', KEYS[1], 'until', 'ar', 'dec', 'ok', 'nts', 'pok', 'pd')
local untilv = math.max(tonumber(h[1]) or 0, now + hold)
redis.call('HSET', KEYS[1], 'until', untilv)
local dec = tonumber(h[3]) or 0
if adapt and now - dec >= math.max(1000, hold) then
  local ar = tonumber(h[2]) or 0
  if ar <= 0 then
    -- First push-back: start from the rate calls were answered clean at (this window and the last,
    -- over at least one window: a burst answered in its first second says nothing of the rate), or,
    -- when none was, one call per wait the server asked for.
    local ok, span = (tonumber(h[4]) or 0) + (tonumber(h[6]) or 0), (now - (tonumber(h[5]) or now)) + (tonumber(h[7]) or 0)
    if ok > 0 then ar = ok / math.max(10000, span) else ar = 1 / math.max(1000, hold) end
  end
  ar = math.max(tonumber(ARGV[4]), ar * tonumber(ARGV[5]))
  redis.call('HSET', KEYS[1], 'ar', ar, 'dec', now)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`;

// ARGV: tokens to add back (negative: take), whether to raise the learnt rate, its floor (calls/ms), the increase share, whether the call was clean.
const SETTLE = `
local h = redis.call('HMGET', KEYS[1], 'k', 'ar')
if h[1] then redis.call('HSET', KEYS[1], 'k', tonumber(h[1]) + tonumber(ARGV[1])) end
local ar = tonumber(h[2]) or 0
if ARGV[5] == '1' then redis.call('HINCRBY', KEYS[1], 'ok', 1) end
if ARGV[2] == '1' and ar > 0 then
  redis.call('HSET', KEYS[1], 'ar', ar + math.max(tonumber(ARGV[3]), ar * tonumber(ARGV[4])))
end
return 1
`;

export interface RateLimits {
  /** Calls per minute over the fleet; null: no configured limit. */
  requestsPerMin: number | null;
  /** Tokens per minute over the fleet; null: none. */
  tokensPerMin: number | null;
  /** Learn a rate from the endpoint's 429s. */
  adaptive: boolean;
}

/** One endpoint's shared pace (see the file comment). Every method may throw on a Redis error; callers wait it out. */
export class SharedRateLimit {
  private readonly args: string[];
  private readonly ttlMs = 10 * 60_000;

  constructor(private readonly redis: Redis, private readonly key: string, private readonly limits: RateLimits) {
    const rr = limits.requestsPerMin === null ? 0 : limits.requestsPerMin / 60_000;
    const kr = limits.tokensPerMin === null ? 0 : limits.tokensPerMin / 60_000;
    this.args = [String(rr), String(Math.max(1, rr * BURST_S * 1000)), String(kr), String(Math.max(1, kr * TOKEN_BURST_S * 1000))];
  }

  /** Ms to wait before a call of about `tokens` tokens may go; 0: it went (and was counted). */
  async tryAcquire(tokens: number): Promise<number> {
    const wait = await this.redis.eval(ACQUIRE, 1, this.key, ...this.args, String(Math.max(0, Math.ceil(tokens))), String(this.ttlMs), this.limits.adaptive ? '1' : '0');
    return Number(wait);
  }

  /** The endpoint pushed back and asked for `holdMs`: every call waits that long, and the learnt rate drops. */
  async pushBack(holdMs: number): Promise<void> {
    await this.redis.eval(PUSHBACK, 1, this.key, String(Math.max(0, Math.round(holdMs))), this.limits.adaptive ? '1' : '0', String(this.ttlMs), String(MIN_RATE_PER_MIN / 60_000), String(DECREASE));
  }

  /** A call ended: `extraTokens` more than its estimate (negative: fewer), and whether it came back clean (the learnt rate grows). */
  async settle(extraTokens: number, clean: boolean): Promise<void> {
    await this.redis.eval(SETTLE, 1, this.key, String(-extraTokens), clean && this.limits.adaptive ? '1' : '0', String(MIN_RATE_PER_MIN / 60_000), String(INCREASE_SHARE), clean ? '1' : '0');
  }

  /** The learnt rate in calls per minute, or null before the endpoint pushed back. */
  async learntPerMin(): Promise<number | null> {
    const ar = Number(await this.redis.hget(this.key, 'ar'));
    return ar > 0 ? ar * 60_000 : null;
  }
}
