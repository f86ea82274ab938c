import { defineConfig } from 'vitest/config';

/** Slow end-to-end tests (`npm run test:slow`): real `waygate` processes, shutdown, budgets across instances. */
export default defineConfig({
  test: {
    include: ['test/slow/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default'],
  },
});
