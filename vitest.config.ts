import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/faults/**', 'test/containers/**'],
    // A test file that leaves a server, a connection, a worker or a child process open fails (test/helpers/leak-guard.ts).
    setupFiles: ['test/helpers/leak-guard.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
