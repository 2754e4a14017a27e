/** Small HTTP helpers of the gateway: refusing a request, reading a bounded body, listening. */
import http from 'node:http';
import type { Refusal } from './request-check.ts';

export function refuse(res: http.ServerResponse, r: Refusal, extraHeaders: http.OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  res.writeHead(r.status, { 'content-type': 'application/json', connection: 'close', ...extraHeaders });
  res.end(JSON.stringify({ error: { message: r.message, type: 'policy_gateway_refused', code: r.reason } }));
}

/** The body, or why it was not read: larger than `max`, or the sandbox hung up. */
export function receiveBody(req: http.IncomingMessage, max: number): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > max) return resolve('too_large');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.pause();
        resolve('too_large');
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve('aborted'));
    req.on('aborted', () => resolve('aborted'));
  });
}

export function listen(server: http.Server, portOrPath: number | string, host?: string): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve(server);
    };
    if (typeof portOrPath === 'string') server.listen(portOrPath, done);
    else server.listen(portOrPath, host, done);
  });
}
