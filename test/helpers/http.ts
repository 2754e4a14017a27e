/** HTTP requests that fetch cannot make. */
import http from 'node:http';

/** GET with a chosen Host header (fetch does not let a caller set it); resolves with the status code. */
export function statusWithHost(url: string, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    http.get(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    }).on('error', reject);
  });
}
