import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNonPublicAddress } from '../../src/areas/agents/addresses.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startFakeOpenAi, type FakeUpstream } from '../helpers/fake-upstream.js';
import { createAgent, publish, respond, agentsCall, AGENTS } from './support.js';

describe('non-public addresses', () => {
  it.each([
    '127.0.0.1', '127.255.0.9', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0',
    '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00::5', 'fc00::1', '::ffff:127.0.0.1', '::ffff:169.254.169.254', 'ff02::1', 'fec0::1', '64:ff9b:1::a00:1', '2001:db8::1',
    '::127.0.0.1', '::ffff:0:127.0.0.1', '2002:7f00:1::', '2001:0:4136:e378::1',
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])('%s is public', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });

  it('an IPv4 address and its IPv4-mapped IPv6 form are judged alike', () => {
    fc.assert(
      fc.property(fc.ipV4(), (address) => {
        expect(isNonPublicAddress(`::ffff:${address}`)).toBe(isNonPublicAddress(address));
      }),
    );
  });
});

/** The default: connected agents reach public addresses only (the fake upstream is on loopback, so it is refused). */
describe('connected agents without WAYGATE_AGENT_ALLOW_PRIVATE_URLS', () => {
  let t: TestApp;
  let fake: FakeUpstream;

  beforeAll(async () => {
    t = await createTestApp({ noWorkers: true });
    fake = await startFakeOpenAi();
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it.each(['http://127.0.0.1:9/v1', 'http://[::1]:9/v1', 'http://169.254.169.254/latest', 'http://10.0.0.1/a2a', 'http://[::ffff:7f00:1]/v1'])('a URL at %s is a 400 naming the setting', async (url) => {
    const res = await agentsCall(t, { method: 'POST', url: AGENTS, payload: { name: 'x', config: { connection: { protocol: 'openai-chat', url, model: 'm' } } } });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.message).toMatch(/is not a public address; set WAYGATE_AGENT_ALLOW_PRIVATE_URLS=true/);
  });

  it('a host name that resolves to loopback is refused when called: 502, and nothing reaches it', async () => {
    const url = fake.baseUrl.replace('127.0.0.1', 'localhost');
    const agent = await createAgent(t, { name: 'Sneaky', config: { connection: { protocol: 'openai-chat', url, model: 'm', apiKey: 'sk-never-sent' } } });
    await publish(t, agent.key);
    const res = await respond(t, { model: agent.key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.message).toMatch(/localhost does not resolve to a public address/);
    expect(res.json().error.message).not.toMatch(/127\.0\.0\.1|::1/);
    expect(fake.requests).toHaveLength(0);
  });

  it('a published version whose URL is not public (saved while allowed) is refused when run: 502, and nothing is sent', async () => {
    const agent = await createAgent(t, { name: 'Moved', config: { connection: { protocol: 'openai-chat', url: 'http://93.184.215.14/v1', model: 'm' } } });
    await publish(t, agent.key);
    const { db } = t.ctx.database;
    const row = await db.selectFrom('agent_versions').innerJoin('agents', 'agents.id', 'agent_versions.agent_id').select(['agent_versions.id', 'agent_versions.config']).where('agents.key', '=', agent.key).executeTakeFirstOrThrow();
    const config = JSON.parse(row.config as string) as { connection: { url: string } };
    config.connection.url = fake.baseUrl;
    await db.updateTable('agent_versions').set({ config: JSON.stringify(config) }).where('id', '=', row.id).execute();
    const res = await respond(t, { model: agent.key, input: 'hi' });
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().error.message).toMatch(/version 1 connects to 127\.0\.0\.1, which is not a public address/);
    expect(fake.requests).toHaveLength(0);
  });
});
