/**
 * Highly available Redis for tests: a Sentinel set (a primary, its replicas, three sentinels) or a
 * Redis Cluster (primaries with a replica each), made of real `redis-server` processes of the test's
 * own on free loopback ports, in a temp folder. Nothing here talks to any other Redis.
 *
 *   const set = await startSentinelSet({ replicas: 1, sentinels: 3 });
 *   await set.kill(set.primary.port);                 // SIGKILL by default
 *   const next = await set.waitForFailover();        // the address the sentinels now give
 *   await set.stop();                                // also stopAllRedisHa() in afterEach
 *
 * Processes and folders go away on `stop()`, on `stopAllRedisHa()`, when this process exits, and
 * (through a small watchdog shell) even when it is SIGKILLed. Set VCFLEET_KEEP_REDIS_HA=1 to keep the
 * folders (configs and logs) after stop.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Address {
  host: string;
  port: number;
}

export interface RedisNodeProcess extends Address {
  /** The pid it was started with (`restart()` returns the node with its new pid). */
  pid: number;
  /** `redis://[:password@]127.0.0.1:port`. */
  url: string;
  /** Its own folder (config, log, AOF, nodes.conf). */
  dir: string;
}

/** A RESP2 reply: status and bulk strings as strings, integers as numbers, nil as null. */
export type Reply = string | number | null | Reply[] | RedisReplyError;

/** An error reply (`-ERR …`, `-READONLY …`, `-MOVED …`). */
export class RedisReplyError extends Error {}

const HOST = '127.0.0.1';
const KEEP = process.env.VCFLEET_KEEP_REDIS_HA === '1';

// --- one command over a plain socket -------------------------------------------------------------

/** Parse one RESP2 reply from `buf` at `at`; null when incomplete. */
function parseReply(buf: Buffer, at: number): { value: Reply; next: number } | null {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[at]);
  const line = buf.toString('utf8', at + 1, eol);
  if (type === '+') return { value: line, next: eol + 2 };
  if (type === '-') return { value: new RedisReplyError(line), next: eol + 2 };
  if (type === ':') return { value: Number(line), next: eol + 2 };
  if (type === '$') {
    const len = Number(line);
    if (len < 0) return { value: null, next: eol + 2 };
    if (buf.length < eol + 2 + len + 2) return null;
    return { value: buf.toString('utf8', eol + 2, eol + 2 + len), next: eol + 2 + len + 2 };
  }
  if (type === '*') {
    const n = Number(line);
    if (n < 0) return { value: null, next: eol + 2 };
    const items: Reply[] = [];
    let next = eol + 2;
    for (let i = 0; i < n; i++) {
      const item = parseReply(buf, next);
      if (!item) return null;
      items.push(item.value);
      next = item.next;
    }
    return { value: items, next };
  }
  throw new Error(`unexpected RESP type ${JSON.stringify(type)}`);
}

/**
 * Send one command (after AUTH when `password` is given) on a fresh socket and return its reply;
 * an error reply is thrown as RedisReplyError, a refused or silent server as an Error naming it.
 */
export async function redisCommand(addr: Address, args: Array<string | number>, opts: { password?: string; timeoutMs?: number } = {}): Promise<Reply> {
  const cmds = opts.password ? [['AUTH', opts.password], args] : [args];
  const wire = cmds.map((c) => `*${c.length}\r\n${c.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`).join('');
  const replies = await new Promise<Reply[]>((resolve, reject) => {
    const socket = net.connect(addr.port, addr.host);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new Error(`no answer from ${addr.host}:${addr.port} to ${args[0]} within ${opts.timeoutMs ?? 2000} ms`)), opts.timeoutMs ?? 2000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.on('connect', () => socket.write(wire));
    socket.on('error', (err) => fail(new Error(`${addr.host}:${addr.port}: ${err.message}`)));
    socket.on('close', () => fail(new Error(`${addr.host}:${addr.port} closed the connection`)));
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const out: Reply[] = [];
      let at = 0;
      while (out.length < cmds.length) {
        const r = parseReply(buf, at);
        if (!r) return;
        out.push(r.value);
        at = r.next;
      }
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    });
  });
  for (const r of replies) if (r instanceof RedisReplyError) throw r;
  return replies[replies.length - 1];
}

/** The reply, or undefined when the node is down or says an error. */
async function tryCommand(addr: Address, args: Array<string | number>, password?: string): Promise<Reply | undefined> {
  return redisCommand(addr, args, { password, timeoutMs: 1000 }).catch(() => undefined);
}

/** `field:value` lines of an INFO section. */
export function infoFields(info: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of info.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Poll `probe` until it gives a value; on timeout, throw naming `what` and what `detail` says then. */
async function waitUntil<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, detail?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`redis-ha: timed out after ${timeoutMs} ms waiting for ${what}${detail ? `\n${detail()}` : ''}`);
    await sleep(100);
  }
}

// --- ports, processes, cleanup -------------------------------------------------------------------

const handedOut = new Set<number>();

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** The first port the kernel hands out for outgoing connections (Linux; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
}

/**
 * A loopback port nobody listens on whose cluster bus port (+10000) is free too, both below the
 * kernel's ephemeral range (so no outgoing connection takes them meanwhile), never one this process
 * handed out before. Random in 10000..(ephemeral low - 10001): 10000..22767 on a default Linux.
 */
export async function freeRedisPort(): Promise<number> {
  const top = Math.max(10_001, ephemeralLow() - 10_001);
  for (let i = 0; i < 200; i++) {
    const port = 10_000 + Math.floor(Math.random() * (top - 10_000));
    if (handedOut.has(port)) continue;
    if ((await canBind(port)) && (await canBind(port + 10_000))) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('redis-ha: no free loopback port pair (port, port+10000) found');
}

interface Managed {
  child: ChildProcess;
  conf: string;
  dir: string;
  password?: string;
  sentinel: boolean;
}

/** Whether the child was started (a failed spawn has no pid) and has not exited. */
const running = (child: ChildProcess) => child.pid !== undefined && child.exitCode === null && child.signalCode === null;

/** Everything started and not yet stopped, by port; the folders of every set not yet removed. */
const live = new Map<number, Managed>();
const liveDirs = new Set<string>();
const liveSets = new Set<{ stop(): Promise<void> }>();

process.once('exit', () => {
  for (const m of live.values()) if (running(m.child)) m.child.kill('SIGKILL');
  if (!KEEP) for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

/** Stop every set this process started and did not stop yet (for `afterEach`). */
export async function stopAllRedisHa(): Promise<void> {
  await Promise.allSettled([...liveSets].map((s) => s.stop()));
}

/**
 * A shell that outlives a SIGKILLed test process: once its parent is gone it SIGKILLs the servers
 * listed in `pids` (checking each still runs a config of this folder) and removes the folder. It
 * ends by itself once the folder is removed by `stop()`.
 */
function startWatchdog(dir: string): void {
  const script = `while [ -d "$1" ] && kill -0 "$2" 2>/dev/null; do sleep 1; done
[ -d "$1" ] || exit 0
for p in $(cat "$1/pids" 2>/dev/null); do tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -qF "$1" && kill -9 $p; done
[ "$3" = 1 ] || rm -rf "$1"`;
  spawn('sh', ['-c', script, 'redis-ha-watchdog', dir, String(process.pid), KEEP ? '1' : '0'], { detached: true, stdio: 'ignore' }).unref();
}

function writePids(dir: string): void {
  const pids = [...live.values()].filter((m) => m.dir.startsWith(dir) && m.child.pid !== undefined).map((m) => m.child.pid);
  writeFileSync(path.join(dir, 'pids'), pids.join('\n'));
}

function logTail(dir: string, lines = 15): string {
  const file = path.join(dir, 'redis.log');
  if (!existsSync(file)) return `(no log in ${dir})`;
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).map((l) => `  | ${l}`).join('\n');
}

/** Start `redis-server conf` (with `--sentinel` for a sentinel) and wait for PONG. */
async function launch(setDir: string, port: number, conf: string, opts: { password?: string; sentinel?: boolean; dir: string; args?: string[] }): Promise<RedisNodeProcess> {
  const out = openSync(path.join(opts.dir, 'stdout.log'), 'a');
  const child = spawn('redis-server', [conf, ...(opts.sentinel ? ['--sentinel'] : []), ...(opts.args ?? [])], { cwd: opts.dir, stdio: ['ignore', out, out] });
  closeSync(out);
  child.unref();
  let spawnError: Error | undefined;
  child.on('error', (err) => (spawnError = err));
  live.set(port, { child, conf, dir: opts.dir, password: opts.password, sentinel: !!opts.sentinel });
  writePids(setDir);
  const addr = { host: HOST, port };
  await waitUntil(`redis-server ${opts.sentinel ? '(sentinel) ' : ''}on port ${port} to answer PING`, async () => {
    if (spawnError) throw new Error(`redis-ha: cannot start redis-server (${spawnError.message}); install Redis 7 (apt-get install redis-server)`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-ha: redis-server on port ${port} exited (${child.exitCode ?? child.signalCode}) at start:\n${logTail(opts.dir)}\n${readFileSync(path.join(opts.dir, 'stdout.log'), 'utf8')}`);
    }
    return (await tryCommand(addr, ['PING'], opts.password)) === 'PONG' ? true : undefined;
  }, 10_000, () => logTail(opts.dir));
  return { ...addr, pid: child.pid!, dir: opts.dir, url: `redis://${opts.password ? `:${encodeURIComponent(opts.password)}@` : ''}${HOST}:${port}` };
}

/** Signal the server on `port`; for SIGKILL, SIGTERM and SIGINT, wait until it exited. */
async function signalNode(port: number, signal: NodeJS.Signals): Promise<void> {
  const m = live.get(port);
  if (!m) throw new Error(`redis-ha: no server of this set on port ${port}`);
  const { child } = m;
  if (!running(child)) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  if (signal === 'SIGKILL' || signal === 'SIGTERM' || signal === 'SIGINT') {
    const late = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(late);
  }
}

/** Start a stopped server of this set again on its port, with its config and data. */
async function relaunch(setDir: string, port: number, args: string[] = []): Promise<RedisNodeProcess> {
  const m = live.get(port);
  if (!m) throw new Error(`redis-ha: no server of this set on port ${port}`);
  if (running(m.child)) throw new Error(`redis-ha: the server on port ${port} still runs`);
  return launch(setDir, port, m.conf, { password: m.password, sentinel: m.sentinel, dir: m.dir, args });
}

/** SIGTERM every server of the set (SIGKILL after 3 s), then remove its folder. Safe to call twice. */
function stopperOf(setDir: string, ports: () => number[]): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  const set = {
    stop: () =>
      (stopping ??= (async () => {
        liveSets.delete(set);
        await Promise.allSettled(
          ports().map(async (port) => {
            const m = live.get(port);
            if (m && running(m.child)) {
              m.child.kill('SIGCONT'); // a paused (SIGSTOP) server cannot act on SIGTERM
              const exited = new Promise((r) => m.child.once('exit', r));
              m.child.kill('SIGTERM');
              const late = setTimeout(() => m.child.kill('SIGKILL'), 3000);
              await exited;
              clearTimeout(late);
            }
            live.delete(port);
            handedOut.delete(port);
          }),
        );
        if (!KEEP) rmSync(setDir, { recursive: true, force: true });
        liveDirs.delete(setDir);
      })()),
  };
  liveSets.add(set);
  return set.stop;
}

function newSetDir(kind: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `vcfleet-redis-${kind}-`));
  liveDirs.add(dir);
  startWatchdog(dir);
  return dir;
}

/** A redis.conf string value: double-quoted, with `\\` and `"` escaped. */
const quoted = (value: string) => `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

function dataNodeConf(port: number, dir: string, o: { password?: string; appendonly: boolean }, extra: string[]): string {
  return [
    `port ${port}`, `bind ${HOST}`, 'protected-mode no', `dir ${dir}`, 'logfile redis.log', 'daemonize no', 'save ""',
    `appendonly ${o.appendonly ? 'yes' : 'no'}`, 'appendfsync everysec', 'maxmemory-policy noeviction',
    'proc-title-template "{title} {listen-addr} {server-mode} {config-file}"',
    // A replica (or a demoted primary) syncs at once, not after the default 5 s wait for more replicas.
    'repl-diskless-sync-delay 0',
    ...(o.password ? [`requirepass ${quoted(o.password)}`, `masterauth ${quoted(o.password)}`] : []),
    ...extra,
  ].join('\n') + '\n';
}

async function startDataNode(setDir: string, name: string, port: number, o: { password?: string; appendonly: boolean }, extra: string[] = []): Promise<RedisNodeProcess> {
  const dir = path.join(setDir, name);
  mkdirSync(dir, { recursive: true });
  const conf = path.join(dir, 'redis.conf');
  writeFileSync(conf, dataNodeConf(port, dir, o, extra));
  return launch(setDir, port, conf, { password: o.password, dir });
}

function isUp(port: number): boolean {
  const m = live.get(port);
  return !!m && running(m.child);
}

// --- Sentinel ------------------------------------------------------------------------------------

export interface SentinelSetOptions {
  /** Replicas of the primary (`replicaof`); default 1. */
  replicas?: number;
  /** Sentinels; default 3. */
  sentinels?: number;
  /** Sentinels that must agree the primary is down; default a majority (2 of 3). */
  quorum?: number;
  /** `requirepass` and `masterauth` of the data nodes (and the sentinels' `auth-pass`). */
  password?: string;
  /** `requirepass` of the sentinels themselves (ioredis `sentinelPassword`); default none. */
  sentinelPassword?: string;
  /** The master group name; default `vcfleet`. */
  masterName?: string;
  /** `sentinel down-after-milliseconds`; default 1000. */
  downAfterMs?: number;
  /** `sentinel failover-timeout`; default 3000. */
  failoverTimeoutMs?: number;
  /** Append-only file on the data nodes (everysec); default true. */
  appendonly?: boolean;
  /** More redis.conf lines for every data node (`min-replicas-to-write 1`, …). */
  dataConf?: string[];
}

export interface SentinelSet {
  masterName: string;
  password?: string;
  sentinelPassword?: string;
  /** The primary at start (see currentPrimary() after a failover). */
  primary: RedisNodeProcess;
  replicas: RedisNodeProcess[];
  sentinels: RedisNodeProcess[];
  /** The set's folder: one subfolder per server with its config and `redis.log`. */
  dir: string;
  /** `redis+sentinel://[:password@]h1:p1,h2:p2,h3:p3/<masterName>` (the form docs/notes propose). */
  url: string;
  /** Options for `new Redis({...})` (ioredis): sentinels, name, password, sentinelPassword. */
  ioredisOptions(): { sentinels: Address[]; name: string; password?: string; sentinelPassword?: string };
  /** The primary a majority of the reachable sentinels names now. */
  currentPrimary(): Promise<Address>;
  /** Signal a server of the set (SIGKILL by default; waits for the exit). */
  kill(port: number, signal?: NodeJS.Signals): Promise<void>;
  /**
   * Start a killed data node or sentinel again. A former primary comes back as a primary until the
   * sentinels demote it (8-20 s in 7.0); `replicaOf` starts it as a replica of that address at once.
   */
  restart(port: number, opts?: { replicaOf?: Address }): Promise<RedisNodeProcess>;
  /**
   * Resolves with the new primary once a quorum of sentinels names one other than `from` (default:
   * the primary last known to this set) and it answers ROLE as master. Timeout default 30 s.
   */
  waitForFailover(opts?: { from?: Address; timeoutMs?: number }): Promise<Address>;
  /**
   * Until every live data node but the current primary replicates it in sync and every live sentinel
   * sees it so (after a restart(), before the next failover). Timeout default 30 s.
   */
  waitForReplicas(timeoutMs?: number): Promise<void>;
  /** The last lines of every server's log (for failure messages). */
  logs(lines?: number): string;
  stop(): Promise<void>;
}

function sentinelConf(port: number, dir: string, primary: Address, o: Required<Pick<SentinelSetOptions, 'masterName' | 'downAfterMs' | 'failoverTimeoutMs'>> & SentinelSetOptions, quorum: number): string {
  const n = o.masterName;
  return [
    `port ${port}`, `bind ${HOST}`, 'protected-mode no', `dir ${dir}`, 'logfile redis.log', 'daemonize no',
    'proc-title-template "{title} {listen-addr} {server-mode} {config-file}"',
    `sentinel monitor ${n} ${primary.host} ${primary.port} ${quorum}`,
    `sentinel down-after-milliseconds ${n} ${o.downAfterMs}`,
    `sentinel failover-timeout ${n} ${o.failoverTimeoutMs}`,
    `sentinel parallel-syncs ${n} 1`,
    ...(o.password ? [`sentinel auth-pass ${n} ${quoted(o.password)}`] : []),
    ...(o.sentinelPassword ? [`requirepass ${quoted(o.sentinelPassword)}`, `sentinel sentinel-pass ${quoted(o.sentinelPassword)}`] : []),
  ].join('\n') + '\n';
}

/** The address in a `SENTINEL get-master-addr-by-name` reply. */
function addressOf(reply: Reply | undefined): Address | undefined {
  return Array.isArray(reply) && reply.length === 2 ? { host: String(reply[0]), port: Number(reply[1]) } : undefined;
}

const same = (a: Address, b: Address) => a.host === b.host && a.port === b.port;

/** A primary, its replicas and sentinels watching them, all ready: replicas in sync, sentinels know each other. */
export async function startSentinelSet(options: SentinelSetOptions = {}): Promise<SentinelSet> {
  const o = { replicas: 1, sentinels: 3, masterName: 'vcfleet', downAfterMs: 1000, failoverTimeoutMs: 3000, appendonly: true, ...options };
  const quorum = o.quorum ?? Math.floor(o.sentinels / 2) + 1;
  const setDir = newSetDir('sentinel');
  const ports: number[] = [];
  const stop = stopperOf(setDir, () => ports);
  const data = { password: o.password, appendonly: o.appendonly };
  const logs = (lines = 15) => ports.map((p) => `${HOST}:${p} (${live.get(p)?.sentinel ? 'sentinel' : 'data'}):\n${logTail(live.get(p)?.dir ?? setDir, lines)}`).join('\n');
  try {
    const next = async () => {
      const p = await freeRedisPort();
      ports.push(p);
      return p;
    };
    const primary = await startDataNode(setDir, 'primary', await next(), data, o.dataConf);
    const replicas: RedisNodeProcess[] = [];
    for (let i = 0; i < o.replicas; i++) {
      replicas.push(await startDataNode(setDir, `replica-${i + 1}`, await next(), data, [...(o.dataConf ?? []), `replicaof ${HOST} ${primary.port}`]));
    }
    for (const r of replicas) {
      await waitUntil(`replica ${r.port} to sync with the primary`, async () => {
        const info = await tryCommand(r, ['INFO', 'replication'], o.password);
        return typeof info === 'string' && infoFields(info).master_link_status === 'up' ? true : undefined;
      }, 15_000, () => logs());
    }
    const sentinels: RedisNodeProcess[] = [];
    for (let i = 0; i < o.sentinels; i++) {
      const port = await next();
      const dir = path.join(setDir, `sentinel-${i + 1}`);
      mkdirSync(dir, { recursive: true });
      const conf = path.join(dir, 'sentinel.conf');
      writeFileSync(conf, sentinelConf(port, dir, primary, o, quorum));
      sentinels.push(await launch(setDir, port, conf, { password: o.sentinelPassword, sentinel: true, dir }));
    }
    // Sentinels find each other and the replicas through hello messages every 2 s: a failover
    // asked for before that would not reach its quorum.
    for (const s of sentinels) {
      await waitUntil(`sentinel ${s.port} to know ${o.sentinels - 1} other sentinels and ${o.replicas} replicas`, async () => {
        const others = await tryCommand(s, ['SENTINEL', 'SENTINELS', o.masterName], o.sentinelPassword);
        const reps = await tryCommand(s, ['SENTINEL', 'REPLICAS', o.masterName], o.sentinelPassword);
        const ok = Array.isArray(others) && others.length === o.sentinels - 1 && Array.isArray(reps) && reps.length === o.replicas;
        return ok && JSON.stringify(reps).match(/s_down|disconnected/) === null ? true : undefined;
      }, 20_000, () => logs());
    }
    let known: Address = { host: primary.host, port: primary.port };
    const sentinelAddrs = sentinels.map((s) => ({ host: s.host, port: s.port }));
    const auth = o.password ? `:${encodeURIComponent(o.password)}@` : '';
    const namedBy = async () => {
      const named = await Promise.all(sentinels.map((s) => tryCommand(s, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', o.masterName], o.sentinelPassword)));
      const counts = new Map<string, number>();
      for (const a of named.map(addressOf)) if (a) counts.set(`${a.host}:${a.port}`, (counts.get(`${a.host}:${a.port}`) ?? 0) + 1);
      return [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => ({ host: k.slice(0, k.lastIndexOf(':')), port: Number(k.slice(k.lastIndexOf(':') + 1)), n }));
    };
    const set: SentinelSet = {
      masterName: o.masterName,
      password: o.password,
      sentinelPassword: o.sentinelPassword,
      primary,
      replicas,
      sentinels,
      dir: setDir,
      url: `redis+sentinel://${auth}${sentinelAddrs.map((s) => `${s.host}:${s.port}`).join(',')}/${o.masterName}`,
      ioredisOptions: () => ({ sentinels: sentinelAddrs, name: o.masterName, ...(o.password ? { password: o.password } : {}), ...(o.sentinelPassword ? { sentinelPassword: o.sentinelPassword } : {}) }),
      async currentPrimary() {
        const top = await waitUntil('the sentinels to name a primary', async () => (await namedBy())[0], 10_000, () => logs());
        return { host: top.host, port: top.port };
      },
      kill: (port, signal = 'SIGKILL') => signalNode(port, signal),
      restart: (port, { replicaOf } = {}) => relaunch(setDir, port, replicaOf ? ['--replicaof', replicaOf.host, String(replicaOf.port)] : []),
      async waitForFailover({ from = known, timeoutMs = 30_000 } = {}) {
        const started = Date.now();
        const found = await waitUntil(`the sentinels to fail over from ${from.host}:${from.port}`, async () => {
          const top = (await namedBy())[0];
          if (!top || top.n < quorum || same(top, from)) return undefined;
          const role = await tryCommand(top, ['ROLE'], o.password);
          return Array.isArray(role) && role[0] === 'master' ? { host: top.host, port: top.port } : undefined;
        }, timeoutMs, () => `(${Date.now() - started} ms)\n${logs()}`);
        known = found;
        return found;
      },
      async waitForReplicas(timeoutMs = 30_000) {
        const current = await set.currentPrimary();
        const others = [primary, ...replicas].filter((n) => isUp(n.port) && n.port !== current.port);
        await waitUntil(`${others.length} replicas in sync with ${current.host}:${current.port}, as the sentinels see them`, async () => {
          for (const r of others) {
            const f = infoFields(String(await tryCommand(r, ['INFO', 'replication'], o.password)));
            if (f.master_link_status !== 'up' || Number(f.master_port) !== current.port) return undefined;
          }
          for (const s of sentinels.filter((x) => isUp(x.port))) {
            const reps = await tryCommand(s, ['SENTINEL', 'REPLICAS', o.masterName], o.sentinelPassword);
            if (!Array.isArray(reps)) return undefined;
            const healthy = reps.map((r) => (r as string[]).join(' ')).filter((r) => !/s_down|disconnected/.test(r) && /master-link-status ok/.test(r));
            if (healthy.length < others.length) return undefined;
          }
          return true;
        }, timeoutMs, () => logs());
      },
      logs,
      stop,
    };
    return set;
  } catch (err) {
    await stop();
    throw err;
  }
}

// --- Cluster -------------------------------------------------------------------------------------

export interface ClusterOptions {
  /** Primaries, each holding a third (etc.) of the 16384 slots; default 3 (the least Redis accepts). */
  primaries?: number;
  /** Replicas of each primary; default 1. */
  replicasPerPrimary?: number;
  /** `requirepass` and `masterauth` of every node. */
  password?: string;
  /** `cluster-node-timeout`: how long a silent node takes to be marked failing; default 1000. */
  nodeTimeoutMs?: number;
  /** Append-only file on every node (everysec); default true. */
  appendonly?: boolean;
  /** More redis.conf lines for every node. */
  dataConf?: string[];
}

export interface SlotOwner {
  slot: number;
  primary: Address;
  replicas: Address[];
}

export interface ClusterSet {
  nodes: RedisNodeProcess[];
  password?: string;
  /** Every node's address, for `new Cluster(startupNodes, ...)`. */
  startupNodes: Address[];
  dir: string;
  /** `CLUSTER KEYSLOT key`. */
  keySlot(key: string): Promise<number>;
  /** Who serves `slot` now, from `CLUSTER NODES` of a live node. */
  slotOwner(slot: number): Promise<SlotOwner>;
  /** Who serves the slot of `key` now. */
  ownerOf(key: string): Promise<SlotOwner>;
  /** The primaries that hold slots now. */
  primaries(): Promise<Address[]>;
  /** Signal a node (SIGKILL by default; waits for the exit). */
  kill(port: number, signal?: NodeJS.Signals): Promise<void>;
  /** Start a killed node again (it rejoins; a former primary comes back as a replica). */
  restart(port: number): Promise<RedisNodeProcess>;
  /**
   * After killing the primary on `port`: resolves with the replica now serving its slots, once every
   * live node agrees and says cluster_state:ok. Timeout default 30 s.
   */
  waitForTakeover(port: number, opts?: { timeoutMs?: number }): Promise<Address>;
  /** Until every live node says cluster_state:ok and agrees on who owns every slot. */
  waitForClusterOk(timeoutMs?: number): Promise<void>;
  logs(lines?: number): string;
  stop(): Promise<void>;
}

interface SlotRange {
  from: number;
  to: number;
  primary: Address;
  replicas: Address[];
}

/**
 * The slot ranges of a `CLUSTER NODES` reply with their primary and live replicas. (`CLUSTER SLOTS`
 * of 7.0 leaves out replicas that have not yet reported a replication offset, as at start.)
 */
function slotRanges(reply: Reply | undefined): SlotRange[] | undefined {
  if (typeof reply !== 'string') return undefined;
  const nodes = reply.trim().split('\n').map((line) => {
    const [id, addr, flags, master, , , , , ...slots] = line.trim().split(' ');
    const hostPort = addr.split('@')[0];
    const i = hostPort.lastIndexOf(':');
    return { id, addr: { host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)) }, flags: flags.split(','), master, slots };
  });
  const ranges: SlotRange[] = [];
  for (const n of nodes) {
    if (!n.flags.includes('master')) continue;
    const replicas = nodes.filter((r) => r.master === n.id && !r.flags.includes('fail')).map((r) => r.addr);
    for (const token of n.slots) {
      if (token.startsWith('[')) continue; // a slot being migrated
      const [from, to = from] = token.split('-').map(Number);
      ranges.push({ from, to, primary: n.addr, replicas });
    }
  }
  return ranges.sort((a, b) => a.from - b.from);
}

function runRedisCli(args: string[], password: string | undefined, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...(password ? { REDISCLI_AUTH: password } : {}) };
    execFile('redis-cli', args, { env, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-ha: redis-cli ${args.slice(0, 2).join(' ')} failed (${err.message}):\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** A Redis Cluster made with `redis-cli --cluster create`, ready: cluster_state:ok everywhere, replicas in sync. */
export async function startCluster(options: ClusterOptions = {}): Promise<ClusterSet> {
  const o = { primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs: 1000, appendonly: true, ...options };
  const setDir = newSetDir('cluster');
  const ports: number[] = [];
  const stop = stopperOf(setDir, () => ports);
  const logs = (lines = 15) => ports.map((p) => `${HOST}:${p}:\n${logTail(live.get(p)?.dir ?? setDir, lines)}`).join('\n');
  const clusterConf = ['cluster-enabled yes', 'cluster-config-file nodes.conf', `cluster-node-timeout ${o.nodeTimeoutMs}`, ...(o.dataConf ?? [])];
  try {
    const nodes: RedisNodeProcess[] = [];
    for (let i = 0; i < o.primaries * (1 + o.replicasPerPrimary); i++) {
      const port = await freeRedisPort();
      ports.push(port);
      nodes.push(await startDataNode(setDir, `node-${port}`, port, { password: o.password, appendonly: o.appendonly }, clusterConf));
    }
    const addrs = nodes.map((n) => `${n.host}:${n.port}`);
    await runRedisCli(['--cluster', 'create', ...addrs, '--cluster-replicas', String(o.replicasPerPrimary), '--cluster-yes'], o.password, 60_000);
    const liveNodes = () => nodes.filter((n) => isUp(n.port));
    const anyLive = async <T>(what: (n: RedisNodeProcess) => Promise<T | undefined>): Promise<T> => {
      for (const n of liveNodes()) {
        const got = await what(n);
        if (got !== undefined) return got;
      }
      throw new Error(`redis-ha: no live cluster node answered\n${logs()}`);
    };
    const slotsOf = (n: Address) => tryCommand(n, ['CLUSTER', 'NODES'], o.password).then(slotRanges);
    const agreed = async () => {
      const views: string[] = [];
      for (const n of liveNodes()) {
        const info = await tryCommand(n, ['CLUSTER', 'INFO'], o.password);
        if (typeof info !== 'string' || infoFields(info).cluster_state !== 'ok') return undefined;
        const ranges = await slotsOf(n);
        if (!ranges) return undefined;
        views.push(JSON.stringify(ranges.map((r) => [r.from, r.to, r.primary.port])));
      }
      return views.every((v) => v === views[0]) ? JSON.parse(views[0]) as Array<[number, number, number]> : undefined;
    };
    const waitForClusterOk = async (timeoutMs = 30_000) => {
      await waitUntil('every cluster node to say cluster_state:ok and agree on the slots', agreed, timeoutMs, () => logs());
    };
    await waitForClusterOk();
    for (const n of nodes) {
      await waitUntil(`cluster node ${n.port} to be a primary or an in-sync replica`, async () => {
        const info = await tryCommand(n, ['INFO', 'replication'], o.password);
        if (typeof info !== 'string') return undefined;
        const f = infoFields(info);
        return f.role === 'master' || f.master_link_status === 'up' ? true : undefined;
      }, 20_000, () => logs());
    }
    // Gossip spreads who replicates whom: until every node knows every replica, a node asked for a
    // slot's owner may name no replica.
    await waitUntil(`every cluster node to know ${o.replicasPerPrimary} replica(s) of each primary`, async () => {
      for (const n of nodes) {
        const ranges = await slotsOf(n);
        if (!ranges || ranges.some((r) => r.replicas.length !== o.replicasPerPrimary)) return undefined;
      }
      return true;
    }, 20_000, () => logs());
    const ownedBefore = new Map<number, Array<[number, number]>>();
    const slotOwner = async (slot: number): Promise<SlotOwner> => {
      const ranges = await anyLive((n) => slotsOf(n));
      const r = ranges.find((x) => x.from <= slot && slot <= x.to);
      if (!r) throw new Error(`redis-ha: no node serves slot ${slot}`);
      return { slot, primary: r.primary, replicas: r.replicas };
    };
    const keySlot = (key: string) => anyLive(async (n) => {
      const s = await tryCommand(n, ['CLUSTER', 'KEYSLOT', key], o.password);
      return typeof s === 'number' ? s : undefined;
    });
    const set: ClusterSet = {
      nodes,
      password: o.password,
      startupNodes: nodes.map((n) => ({ host: n.host, port: n.port })),
      dir: setDir,
      keySlot,
      slotOwner,
      ownerOf: async (key) => slotOwner(await keySlot(key)),
      primaries: async () => {
        const ranges = await anyLive((n) => slotsOf(n));
        return [...new Map(ranges.map((r) => [r.primary.port, r.primary])).values()];
      },
      async kill(port, signal = 'SIGKILL') {
        const ranges = await anyLive((n) => slotsOf(n)).catch(() => []);
        const owned = ranges.filter((r) => r.primary.port === port).map((r) => [r.from, r.to] as [number, number]);
        if (owned.length) ownedBefore.set(port, owned);
        await signalNode(port, signal);
      },
      restart: (port) => relaunch(setDir, port),
      async waitForTakeover(port, { timeoutMs = 30_000 } = {}) {
        const owned = ownedBefore.get(port);
        if (!owned) throw new Error(`redis-ha: the node on port ${port} held no slots when it was killed (kill it with set.kill)`);
        const started = Date.now();
        const owner = await waitUntil(`a replica to take over the slots of ${HOST}:${port}`, async () => {
          const view = await agreed();
          const holder = view?.find(([from]) => from === owned[0][0]);
          return holder && holder[2] !== port ? holder[2] : undefined;
        }, timeoutMs, () => `(${Date.now() - started} ms)\n${logs()}`);
        return { host: HOST, port: owner };
      },
      waitForClusterOk,
      logs,
      stop,
    };
    return set;
  } catch (err) {
    await stop();
    throw err;
  }
}
