/**
 * The fake OpenSandbox server says what the real one says (issue 43's table, found by running the
 * real server): status codes and bodies of the lifecycle API, endpoint formats, the egress
 * endpoint's header, TTL removal, and in a sandbox the image's user, its writable places and the
 * request's environment laid over the image's.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OpenSandboxProvider } from '../../src/sandboxes/opensandbox/provider.ts';
import { startFakeOpenSandbox, type FakeOpenSandbox } from './fake-opensandbox-server.ts';
import { waitFor } from './wait.ts';

const KEY = 'table-key';
const GATEWAY = { url: 'http://127.0.0.1:9', port: 9 };
let fake: FakeOpenSandbox;

async function call(method: string, path: string, body?: unknown, key: string | null = KEY): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { ...(key === null ? {} : { 'OPEN-SANDBOX-API-KEY': key }), ...(body ? { 'content-type': 'application/json' } : {}) };
  const res = await fetch(`http://${fake.domain}${path}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const CREATE = { image: { uri: 'visual-coding-fleet-sandbox:latest' }, entrypoint: ['tail', '-f', '/dev/null'], timeout: 60, metadata: { k: 'v' } };

beforeEach(async () => {
  fake = await startFakeOpenSandbox({ apiKey: KEY });
});
afterEach(async () => {
  await fake.close();
});

describe('the fake OpenSandbox server, row by row', () => {
  it('401 without or with a wrong key', async () => {
    expect(await call('GET', '/v1/sandboxes', undefined, null)).toMatchObject({ status: 401, body: { code: 'MISSING_API_KEY' } });
    expect(await call('GET', '/v1/sandboxes', undefined, 'wrong')).toMatchObject({ status: 401, body: { code: 'INVALID_API_KEY' } });
  });

  it('a create is 202 with a status and no image; FastAPI 422s for a short timeout, no image, no entrypoint', async () => {
    const made = await call('POST', '/v1/sandboxes', CREATE);
    expect(made.status).toBe(202);
    const status = (made.body as { status: Record<string, unknown> }).status;
    expect(Object.keys(status).sort()).toEqual(['lastTransitionAt', 'message', 'reason', 'state']);
    expect(status.state).toBe('Running');
    expect(made.body).not.toHaveProperty('image');
    const short = await call('POST', '/v1/sandboxes', { ...CREATE, timeout: 30 });
    expect(short.status).toBe(422);
    expect((short.body as { detail: { type: string; loc: string[] }[] }).detail[0]).toMatchObject({ type: 'greater_than_equal', loc: ['body', 'timeout'] });
    expect(await call('POST', '/v1/sandboxes', { ...CREATE, image: undefined })).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'image'] }] } });
    expect(await call('POST', '/v1/sandboxes', { ...CREATE, entrypoint: undefined })).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'entrypoint'] }] } });
  });

  it('a networkPolicy without egress is 400; an image not in the engine 500', async () => {
    fake.options.egressImage = false;
    const policy = { defaultAction: 'deny', egress: [{ action: 'allow', target: 'gw' }] };
    expect(await call('POST', '/v1/sandboxes', { ...CREATE, networkPolicy: policy })).toMatchObject({ status: 400, body: { code: 'SANDBOX::INVALID_PARAMETER' } });
    fake.options.images = { 'visual-coding-fleet-sandbox:latest': {} };
    expect(await call('POST', '/v1/sandboxes', { ...CREATE, image: { uri: 'nowhere:1' } })).toMatchObject({ status: 500, body: { code: 'DOCKER::SANDBOX_IMAGE_PULL_FAILED' } });
    expect(fake.sandboxes.size).toBe(0);
  });

  it('GET and DELETE of an unknown id are 404; a delete is 204, then 404; the list pages with metadata', async () => {
    expect(await call('GET', '/v1/sandboxes/nope')).toMatchObject({ status: 404, body: { code: 'DOCKER::SANDBOX_NOT_FOUND' } });
    const id = ((await call('POST', '/v1/sandboxes', CREATE)).body as { id: string }).id;
    await call('POST', '/v1/sandboxes', { ...CREATE, metadata: { k: 'other' } });
    const list = await call('GET', '/v1/sandboxes?metadata=k%3Dv&page=1&pageSize=100');
    expect(list.body).toMatchObject({ items: [{ id }], pagination: { page: 1, pageSize: 100, totalItems: 1, totalPages: 1, hasNextPage: false } });
    expect((await call('DELETE', `/v1/sandboxes/${id}`)).status).toBe(204);
    expect(await call('DELETE', `/v1/sandboxes/${id}`)).toMatchObject({ status: 404, body: { code: 'DOCKER::SANDBOX_NOT_FOUND' } });
    expect((await call('GET', `/v1/sandboxes/${id}`)).status).toBe(404);
  });

  it('endpoints: a host port or the server\'s proxy, no /v1; the egress one carries OPENSANDBOX-EGRESS-AUTH', async () => {
    const id = ((await call('POST', '/v1/sandboxes', CREATE)).body as { id: string }).id;
    const direct = (await call('GET', `/v1/sandboxes/${id}/endpoints/44772`)).body as { endpoint: string };
    expect(direct.endpoint).toMatch(/^127\.0\.0\.1:\d+\/proxy\/44772$/);
    expect(direct.endpoint.startsWith(fake.domain)).toBe(false);
    expect((await fetch(`http://${direct.endpoint}/ping`)).status).toBe(200);
    const proxied = (await call('GET', `/v1/sandboxes/${id}/endpoints/44772?use_server_proxy=true`)).body as { endpoint: string };
    expect(proxied.endpoint).toBe(`${fake.domain}/sandboxes/${id}/proxy/44772`);
    const egress = (await call('GET', `/v1/sandboxes/${id}/endpoints/18080`)).body as { endpoint: string; headers: Record<string, string> };
    expect(egress.headers['OPENSANDBOX-EGRESS-AUTH']).toBeTruthy();
    expect((await fetch(`http://${egress.endpoint}/policy`)).status).toBe(401);
    expect((await fetch(`http://${egress.endpoint}/policy`, { headers: egress.headers })).status).toBe(200);
  });

  it('after its timeout the server removes a sandbox', async () => {
    fake.options.secondMs = 5;
    const id = ((await call('POST', '/v1/sandboxes', CREATE)).body as { id: string }).id;
    await waitFor('the TTL to remove the sandbox', async () => (await call('GET', `/v1/sandboxes/${id}`)).status === 404, 10_000, 50);
    expect(fake.sandboxes.get(id)!.deleted).toBe(true);
  });

  it('in a sandbox: the image user, its home writable, the request env laid over the image env', async () => {
    const p = new OpenSandboxProvider({ domain: fake.domain, apiKey: KEY, image: 'img:1', ttlS: 600, resources: { cpu: 1, memory_mib: 512 }, workdir: '/workspace', readyTimeoutS: 5 });
    const sb = await p.create({ label: 'env', gateway: GATEWAY, env: { FROM_CREATE: 'c' } });
    try {
      const bare = await sb.exec(['bash', '-c', 'id -u; echo "$PATH"; echo "$FROM_CREATE"; echo hi > ~/note && cat ~/note; touch /usr/x 2>/dev/null || echo no-usr']);
      expect(bare.stdout).toBe('1000\n/opt/opencode/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nc\nhi\nno-usr\n');
      await sb.putFile('/home/sandbox/up.txt', 'uploaded');
      expect((await sb.getFile('/home/sandbox/up.txt')).toString()).toBe('uploaded');
      const sent = await sb.exec(['bash', '-c', 'echo "$PATH"; opencode --version'], { env: { PATH: '/usr/bin:/bin' } });
      expect([sent.stdout, sent.exitCode]).toEqual(['/usr/bin:/bin\n', 127]);
      const byPath = await sb.exec(['/opt/opencode/bin/opencode', '--version'], { env: { PATH: '/usr/bin:/bin' } });
      expect([byPath.stdout.trim(), byPath.exitCode]).toEqual(['1.17.11', 0]);
    } finally {
      await p.close();
    }
  });
});
