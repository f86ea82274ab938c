import { parseArgs } from 'node:util';
import { ConfigError, hasPasswordLength, loadConfig, MAX_NAME_LENGTH, PASSWORD_LENGTH } from '../config.js';
import type { Context } from '../context.js';
import { ROLES, type Role } from '../http/rbac.js';

const HELP: Record<string, string> = {
  main: `Usage: waygate <command> [options]

Commands:
  serve                     Run the gateway (same as npm start)
  init                      Create the database, tenant, project and admin without serving; prints JSON
  tokens create|list|revoke Manage API tokens of the default tenant
  users reset-password      Set a user's password (generated when not given) and end their sessions
  license inspect           Show the configured licence and whether it verifies

Configuration comes from the environment (see README). Every command takes --help.`,
  serve: `Usage: waygate serve\n\nRuns Waygate until SIGTERM or SIGINT. Configured by environment variables (PORT, HOST, DATABASE_URL, ...).`,
  init: `Usage: waygate init\n\nApplies migrations and creates tenant "default", project "default" and the instance admin (and the\nWAYGATE_BOOTSTRAP_TOKEN token when set). Prints JSON; the generated admin password appears only on the first run.`,
  tokens: `Usage: waygate tokens <create|list|revoke> [options]

  create --name NAME [--project KEY|--no-project] [--role owner|admin|member|viewer] [--expires DATETIME]
         Prints JSON {token, value}; the value is shown only here. DATETIME is RFC 3339, e.g. 2030-01-31T00:00:00Z.
  list   Prints JSON {tokens} of the default tenant (never values).
  revoke --id TOKEN_ID`,
  users: `Usage: waygate users reset-password --email EMAIL [--password PASSWORD]

  Sets the password (a generated one, printed once, when --password is omitted) and ends the user's sessions.
  Prints JSON {user} and, when it was generated, {password}.`,
  license: `Usage: waygate license inspect\n\nVerifies WAYGATE_LICENSE against the built-in key or WAYGATE_LICENSE_PUBLIC_KEY and prints its claims as JSON.\nExits 0 when it verifies or none is set, 1 otherwise.`,
};

function print(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

class UsageError extends Error {}

type OptionSpec = Record<string, { type: 'string' | 'boolean' }>;

/** The command's options, strictly: an unknown option, a missing value or a stray argument is a usage error (exit 2). */
function optionsOf<T extends OptionSpec>(command: string, args: string[], options: T): ReturnType<typeof parseArgs<{ args: string[]; options: T; strict: true }>>['values'] {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError(`${err instanceof Error ? err.message : String(err)}\n\n${HELP[command]}`);
  }
}

/** Commands configured only by the environment refuse arguments rather than ignore them (`serve --port 1`). */
function noArguments(command: string, args: (string | undefined)[]): void {
  const given = args.filter((arg) => arg !== undefined);
  if (given.length > 0) throw new UsageError(`waygate ${command} takes no arguments (got ${given.join(' ')}); it is configured by environment variables.\n\n${HELP[command]}`);
}

// The server, database and crypto modules load only for commands that use them, so --help answers at once.
async function withContext<T>(fn: (ctx: Context) => Promise<T>, options: { bootstrapToken: boolean } = { bootstrapToken: false }): Promise<T> {
  const config = loadConfig();
  const [{ default: pino }, { createContext }] = await Promise.all([import('pino'), import('../context.js')]);
  const ctx = await createContext(config, { logger: pino({ level: 'warn' }, process.stderr), skipBootstrapToken: !options.bootstrapToken });
  try {
    return await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/** The format POST /api/tokens takes for expiresAt (an RFC 3339 date-time, a real calendar day); the service checks the rest. */
async function checkExpires(expires: string): Promise<void> {
  const [{ compileBodyValidator }, { IsoDateTime }] = await Promise.all([import('../http/validation.js'), import('../http/schemas.js')]);
  if (!compileBodyValidator(IsoDateTime)(expires)) {
    throw new UsageError(`--expires must be an RFC 3339 date-time such as 2030-01-31T00:00:00Z, got "${expires}"`);
  }
}

type TokenOptions = { name?: string; project?: string; 'no-project'?: boolean; role?: string; expires?: string; id?: string };

/** A subcommand's options, checked before any database is opened. */
async function checkTokenOptions(sub: string | undefined, values: TokenOptions): Promise<void> {
  if (sub === 'list') return;
  if (sub === 'revoke') {
    if (!values.id) throw new UsageError('tokens revoke needs --id');
    return;
  }
  if (sub !== 'create') throw new UsageError(HELP.tokens!);
  if (!values.name) throw new UsageError('tokens create needs --name');
  // The API's length for names (counted as its schema counts them), and not blank: a name of spaces would list as
  // nothing.
  if (values.name.trim() === '' || [...values.name].length > MAX_NAME_LENGTH) throw new UsageError(`--name must be 1 to ${MAX_NAME_LENGTH} characters, not only spaces`);
  if (values['no-project'] && values.project !== undefined) throw new UsageError('--project and --no-project exclude each other');
  if (!ROLES.includes((values.role ?? 'member') as Role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`);
  if (values.expires !== undefined) await checkExpires(values.expires);
}

async function tokensCommand(sub: string | undefined, args: string[]): Promise<void> {
  const values: TokenOptions = optionsOf('tokens', args, {
    name: { type: 'string' },
    project: { type: 'string' },
    'no-project': { type: 'boolean' },
    role: { type: 'string' },
    expires: { type: 'string' },
    id: { type: 'string' },
  });
  await checkTokenOptions(sub, values);
  const { tokenView } = await import('../areas/tokens/service.js');
  await withContext(async (ctx) => {
    const tenantId = ctx.bootstrap.tenantId;
    const { tokens, projects } = ctx.services;
    if (sub === 'list') return print({ tokens: (await tokens.listAll(tenantId)).map(tokenView) });
    if (sub === 'revoke') return print({ token: tokenView(await tokens.revoke({ kind: 'system', tenantId }, values.id!)) });
    const projectId = values['no-project'] ? null : (await projects.require(tenantId, values.project ?? 'default')).id;
    const role = (values.role ?? 'member') as Role;
    const { token, value } = await tokens.create({ kind: 'system', tenantId }, { name: values.name!, projectId, role, expiresAt: values.expires });
    return print({ token: tokenView(token), value });
  });
}

async function inspectLicence(): Promise<void> {
  const config = loadConfig();
  const { verifyLicence } = await import('../platform/licence.js');
  const licence = await verifyLicence(config.license, config.licensePublicKey);
  const exp = licence.claims?.exp;
  // Claims are shown only when the signature verified (valid or expired licences).
  print({ state: licence.state, error: licence.error, ...licence.claims, expiresAt: exp ? new Date(exp * 1000).toISOString() : null });
  // Scripts can tell from the exit code: 0 when no licence is set or it verifies, 1 otherwise.
  if (licence.state !== 'valid' && licence.state !== 'none') process.exitCode = 1;
}

async function usersCommand(sub: string | undefined, args: string[]): Promise<void> {
  const values = optionsOf('users', args, { email: { type: 'string' }, password: { type: 'string' } });
  if (sub !== 'reset-password') throw new UsageError(HELP.users!);
  if (!values.email) throw new UsageError('users reset-password needs --email');
  if (values.password !== undefined && !hasPasswordLength(values.password)) throw new UsageError(`--password must be ${PASSWORD_LENGTH.min} to ${PASSWORD_LENGTH.max} characters`);
  const { userView } = await import('../areas/users/service.js');
  await withContext(async (ctx) => {
    const { user, password } = await ctx.services.users.resetPassword(values.email!, values.password);
    // A password given on the command line is not printed back (it would land in terminal logs a second time).
    print({ user: userView(user), ...(values.password === undefined ? { password } : {}) });
  });
}

export async function runCli(argv: string[]): Promise<void> {
  const [command, sub, ...rest] = argv;
  const wantsHelp = argv.includes('--help') || argv.includes('-h');
  if (command === 'help' && sub && HELP[sub]) return void process.stdout.write(HELP[sub] + '\n');
  if (!command || command === 'help' || (wantsHelp && !HELP[command])) return void process.stdout.write(HELP.main + '\n');
  if (wantsHelp) return void process.stdout.write(HELP[command] + '\n');
  switch (command) {
    case 'serve':
      noArguments('serve', [sub, ...rest]);
      return (await import('../main.js')).serve();
    case 'init':
      noArguments('init', [sub, ...rest]);
      return withContext(async (ctx) => print({ ...ctx.bootstrap, database: ctx.database.dialect, dataDir: ctx.config.dataDir }), {
        bootstrapToken: true,
      });
    case 'tokens':
      return tokensCommand(sub, rest);
    case 'users':
      return usersCommand(sub, rest);
    case 'license':
      if (sub !== 'inspect') throw new UsageError(HELP.license!);
      noArguments('license', rest);
      return inspectLicence();
    default:
      throw new UsageError(`Unknown command "${command}".\n\n${HELP.main}`);
  }
}

runCli(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(err.message + '\n');
    process.exit(2);
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`waygate: ${message}\n`);
  process.exit(1);
});
