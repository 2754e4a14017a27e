/**
 * The leak guard (a setup file of every test run of `npm test`): a test file that leaves a server, a
 * connection (Redis, HTTP, a Unix socket), a BullMQ worker (its connections) or a child process open
 * after its last hook fails, naming what it left. It compares the handles Node holds when the file's
 * first hook starts with those it holds after the last one ends (its `afterAll` runs last), allowing
 * closing handles a few seconds to go.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll } from 'vitest';

/** The handles that are a server, a connection or a process (timers and file requests are not). */
const WATCHED: Readonly<Record<string, string>> = {
  TCPServerWrap: 'TCP server',
  PipeServerWrap: 'Unix socket server',
  TCPSocketWrap: 'TCP connection (Redis, HTTP, ...)',
  PipeWrap: 'Unix socket or pipe',
  ProcessWrap: 'child process',
  UDPWrap: 'UDP socket',
};
/** How long closing handles may take to go, in ms. */
const SETTLE_MS = 5_000;

function watched(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) if (kind in WATCHED) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** What `now` holds beyond `before`, as "2 TCP server", ... */
export function leftOpen(before: ReadonlyMap<string, number>, now: ReadonlyMap<string, number>): string[] {
  return [...now].filter(([kind, n]) => n > (before.get(kind) ?? 0)).map(([kind, n]) => `${n - (before.get(kind) ?? 0)} ${WATCHED[kind] ?? kind}`);
}

let before = new Map<string, number>();

beforeAll(() => {
  before = watched();
});

afterAll(async () => {
  const deadline = Date.now() + SETTLE_MS;
  let open = leftOpen(before, watched());
  while (open.length > 0 && Date.now() < deadline) {
    await sleep(100);
    open = leftOpen(before, watched());
  }
  if (open.length > 0) {
    throw new Error(`this test file left open: ${open.join(', ')}; close every server, connection, worker and child process it opens (in an afterAll or afterEach)`);
  }
});
