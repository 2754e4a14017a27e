/** What pauses a run: rollout attempts that failed on the policy server by the error's code, never by its words. */
import { describe, expect, it } from 'vitest';
import { InfraError } from '../../src/shared/errors.ts';
import { PolicyFailures } from '../../src/all-in-one/run-watch.ts';

describe('PolicyFailures', () => {
  it('counts failures coded policy_server, and nothing that merely says "policy server"', () => {
    const f = new PolicyFailures();
    f.record('failed', new InfraError('a sandbox error quoting the model: "the policy server is down"'));
    f.record('failed', new Error('the policy server failed 5 calls in a row'));
    f.record('requeued', new InfraError('the policy server failed', { code: 'policy_server' }));
    expect(f.count).toBe(0);
    f.record('failed', new InfraError('the policy server at http://x/v1 refused a call (HTTP 401)', { code: 'policy_server' }));
    expect(f).toMatchObject({ count: 1, first: 'the policy server at http://x/v1 refused a call (HTTP 401)' });
  });
});
