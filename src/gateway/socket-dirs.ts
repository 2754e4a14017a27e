/**
 * Host folders of the per-rollout policy gateways of `local` sandboxes: `<socketDir>/vcfleet-gw-*`
 * holding `gateway.sock`. A worker that dies (SIGKILL, OOM) leaves its folders behind; a worker
 * that starts removes those whose socket no longer answers.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

export const GATEWAY_DIR_PREFIX = 'vcfleet-gw-';

/** A folder younger than this may belong to a gateway that is still starting. */
const STARTING_GRACE_MS = 60_000;

function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    socket.setTimeout(2000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(true); // slow, not dead: leave it
    });
    socket.once('error', () => resolve(false));
  });
}

/** Removes the gateway folders under `socketDir` that no live gateway serves; returns how many. */
export async function reapOrphanGatewayDirs(socketDir: string): Promise<number> {
  const names = await readdir(socketDir).catch(() => [] as string[]);
  let reaped = 0;
  for (const name of names) {
    if (!name.startsWith(GATEWAY_DIR_PREFIX)) continue;
    const dir = path.join(socketDir, name);
    const st = await stat(dir).catch(() => null);
    if (!st?.isDirectory()) continue;
    const socket = path.join(dir, 'gateway.sock');
    const hasSocket = (await stat(socket).catch(() => null))?.isSocket() ?? false;
    // A socket that refuses connections has lost its server; a folder without one may be starting.
    if (hasSocket ? await answers(socket) : Date.now() - st.mtimeMs < STARTING_GRACE_MS) continue;
    await rm(dir, { recursive: true, force: true });
    reaped++;
  }
  return reaped;
}
