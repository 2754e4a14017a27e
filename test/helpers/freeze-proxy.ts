/**
 * A TCP proxy in front of a real Redis whose established connections can be frozen: bytes stop
 * flowing both ways while the sockets stay open, as with a host that died behind a route that drops
 * its packets (no RST, no FIN). New connections still go through. For tests of what a client does
 * when a connection it holds goes silent (a failover that took the old primary away).
 */
import net from 'node:net';

export interface FreezeProxy {
  port: number;
  /** Connections made so far. */
  connections(): number;
  /** Stop forwarding on every connection open now but the first `spare` made (later ones flow). */
  freeze(spare?: number): void;
  close(): Promise<void>;
}

export async function startFreezeProxy(target: { host: string; port: number }): Promise<FreezeProxy> {
  const open = new Set<{ client: net.Socket; upstream: net.Socket; frozen: boolean; nth: number }>();
  let made = 0;
  const server = net.createServer((client) => {
    made++;
    const upstream = net.connect(target.port, target.host);
    const pair = { client, upstream, frozen: false, nth: made };
    open.add(pair);
    client.on('data', (d) => void (pair.frozen || upstream.write(d)));
    upstream.on('data', (d) => void (pair.frozen || client.write(d)));
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => made,
    freeze: (spare = 0) => open.forEach((p) => (p.frozen = p.nth > spare)),
    close: () =>
      new Promise<void>((resolve) => {
        open.forEach((p) => {
          p.client.destroy();
          p.upstream.destroy();
        });
        server.close(() => resolve());
      }),
  };
}
