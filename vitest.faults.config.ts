import { defineConfig } from 'vitest/config';

/**
 * `npm run test:faults`: the fault suite (test/faults). Each test breaks something real (SIGKILLed
 * roles, a Redis restart or stall, judge and policy outages, a full disk, poison jobs, bad input,
 * sandbox escape attempts) and checks that every rollout still ends with exactly one row, rewards
 * equal the fault-free ones, and nothing (sandbox, process, temp folder, secret) is left behind.
 * Two files at a time: several tests run real OpenCode sessions and many vcfleet processes.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
