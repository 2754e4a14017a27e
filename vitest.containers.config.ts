import { defineConfig } from 'vitest/config';

/**
 * `npm run test:containers`: tests against the real Docker engine and the images .ci/containers
 * builds (test/containers): the `docker` sandbox provider with the sandbox image. .ci/containers
 * runs it once the images exist; alone: `.ci/containers --keep-images`, then this. Skipped, saying
 * so, where no Docker engine answers.
 */
export default defineConfig({
  test: {
    include: ['test/containers/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
  },
});
