import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    // A condition a test waits for (a record written, a connection closed) may take seconds on a loaded CI machine; a
    // poll that passes returns as soon as it does, so only a failing test waits the longer default.
    expect: { poll: { timeout: 5_000 } },
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: more workers only add contention to timing-sensitive end-to-end tests.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
})
