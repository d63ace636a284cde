import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: more workers only add contention to timing-sensitive end-to-end tests.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
})
