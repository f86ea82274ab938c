/** `npm run bench`: every benchmark in bench/, one after the other (so far: auth-overhead). Arguments pass through. */
import { authOverhead } from './auth-overhead.js';

authOverhead(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`benchmark failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
