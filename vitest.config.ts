import { defineConfig } from 'vitest/config';

/** The inner loop (`npm test`). Real-process and multi-instance end-to-end tests are `npm run test:slow`. */
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/slow/**', 'node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
    reporters: ['default'],
  },
});
