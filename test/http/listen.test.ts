/** The one listen/close of every HTTP server: the bound port, the URL's host, and a close that drops hung connections. */
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { listen, urlHost } from '../../src/http/listen.ts';

describe('listen', () => {
  it('binds a free port for 0 and names it in the origin', async () => {
    const server = await listen(http.createServer((_req, res) => res.end('ok')), '127.0.0.1', 0);
    try {
      expect(server.port).toBeGreaterThan(0);
      expect(server.origin).toBe(`http://127.0.0.1:${server.port}`);
      expect(await (await fetch(server.origin)).text()).toBe('ok');
    } finally {
      await server.close();
    }
  });

  it('writes an IPv6 host in brackets', () => {
    expect(urlHost('::1')).toBe('[::1]');
    expect(urlHost('localhost')).toBe('localhost');
  });

  it('rejects an address that cannot be bound', async () => {
    const first = await listen(http.createServer(), '127.0.0.1', 0);
    try {
      await expect(listen(http.createServer(), '127.0.0.1', first.port)).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await first.close();
    }
  });

  it('close() ends at once although a request hangs, and is safe to call twice', async () => {
    const server = await listen(http.createServer(() => {}), '127.0.0.1', 0);
    const socket = net.connect(server.port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await Promise.all([server.close(), server.close()]);
    await closed;
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
