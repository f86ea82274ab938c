import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import type { TestProject } from 'vitest/node';

const ROOT = path.resolve(import.meta.dirname, '..');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/**
 * Tests that start real `waygate` processes run the sources transpiled once per test run (esbuild, well under a
 * second) instead of paying tsx's start-up in every child, and never depend on a stale dist/.
 */
export default async function setup(project: TestProject): Promise<() => void> {
  const outdir = path.join(ROOT, '.test-build', String(process.pid));
  await build({
    entryPoints: sourceFiles(path.join(ROOT, 'src')),
    outdir,
    outbase: path.join(ROOT, 'src'),
    format: 'esm',
    platform: 'node',
    target: 'node20',
    bundle: false,
    sourcemap: false,
    logLevel: 'error',
  });
  project.provide('cliEntry', path.join(outdir, 'cli', 'index.js'));
  return () => fs.rmSync(outdir, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    cliEntry: string;
  }
}
