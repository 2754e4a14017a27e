/**
 * Listening on an address and stopping, one way for every HTTP server of vcfleet: the dashboard, the
 * viewer, `vcfleet serve`, the metrics endpoint, and the scripted policy and judge servers.
 */
import type { AddressInfo, Server, Socket } from 'node:net';
import { ConfigError } from '../shared/errors.ts';

/** The address is taken (EADDRINUSE): another process, often another vcfleet, listens there. */
export class AddressInUseError extends ConfigError {
  override name = 'AddressInUseError';
  constructor(readonly host: string, readonly port: number, options?: ErrorOptions) {
    super(`${urlHost(host)}:${port} is already in use (EADDRINUSE): another program listens there, perhaps another vcfleet (view, dashboard, serve or stand-in) still running`, options);
  }
}

export interface Listening {
  /** `http://host:port` (an IPv6 host in brackets), without a trailing slash. */
  readonly origin: string;
  /** The port bound: the one picked when 0 was asked for. */
  readonly port: number;
  /** Stop listening and drop every open connection, idle, busy or hung. Safe to call twice. */
  close(): Promise<void>;
}

/** A host as it is written in a URL: an IPv6 address in brackets. */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Listen on `host:port` (port 0: any free port); rejects when the address cannot be bound (taken: AddressInUseError). */
export async function listen(server: Server, host: string, port: number): Promise<Listening> {
  // Every connection, so that close() can end a hung one (server.close() waits for them all).
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'EADDRINUSE' ? new AddressInUseError(host, port, { cause: err }) : err));
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    origin: `http://${urlHost(host)}:${bound}`,
    port: bound,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}
