import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { exposedAgent, expectRpcError, METHODS, rpc, rpcRaw, send, userMessage, type Version } from './support.js';

/** Interface 4.1 rules 2-3: every protocol failure is HTTP 200 with a JSON-RPC error; the dialect is A2A-Version's. */
describe.each(BACKENDS)('A2A JSON-RPC protocol errors on %s', (backend) => {
  let t: TestApp;
  let key: string;

  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true, env: { WAYGATE_AGENT_ALLOW_PRIVATE_URLS: 'true' } });
    key = await exposedAgent(t);
  });
  afterAll(async () => t?.close());

  it('-32700 for a body that is not JSON (id null), whatever the content type', async () => {
    for (const body of ['{"jsonrpc": "2.0", "id": 1, "method": ', 'not json at all', '', '   ']) {
      expectRpcError(await rpcRaw(t, key, body), -32700, null);
      expectRpcError(await rpcRaw(t, key, body, { version: '1.0' }), -32700, null);
    }
    expectRpcError(await rpcRaw(t, key, '{oops', { headers: { 'content-type': 'text/plain' } }), -32700, null);
    expectRpcError(await rpcRaw(t, key, '{"__proto__": {"x": 1}}'), -32700, null);
  });

  it.each([
    ['a batch', '[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}]', null],
    ['a string', '"message/send"', null],
    ['a number', '42', null],
    ['null', 'null', null],
    ['no jsonrpc', '{"id":7,"method":"tasks/get","params":{"id":"x"}}', 7],
    ['jsonrpc 1.0', '{"jsonrpc":"1.0","id":"a","method":"tasks/get","params":{"id":"x"}}', 'a'],
    ['no method', '{"jsonrpc":"2.0","id":8,"params":{}}', 8],
    ['an empty method', '{"jsonrpc":"2.0","id":8,"method":"","params":{}}', 8],
    ['a method that is not a string', '{"jsonrpc":"2.0","id":8,"method":5}', 8],
    ['an object id', '{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get","params":{"id":"x"}}', null],
    ['a NUL in a string', '{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"a\\u0000b"}}', null],
  ])('-32600 for %s', async (_case, body, id) => {
    expectRpcError(await rpcRaw(t, key, body), -32600, id);
    expectRpcError(await rpcRaw(t, key, body, { version: '1.0' }), -32600, id);
  });

  it('echoes string, numeric and null ids; a request without id is answered with id null', async () => {
    for (const id of ['req-1', 42, 0, -3.5, null]) {
      const res = await rpcRaw(t, key, { jsonrpc: '2.0', id, method: 'tasks/cancel', params: { id: 'x' } });
      expectRpcError(res, -32004, id);
    }
    expectRpcError(await rpcRaw(t, key, { jsonrpc: '2.0', method: 'tasks/cancel', params: { id: 'x' } }), -32004, null);
  });

  it('-32601 for unknown methods, and for the other dialect\'s methods with a hint about A2A-Version', async () => {
    expectRpcError(await rpc(t, key, '0.3', 'tasks/list', {}), -32601);
    expectRpcError(await rpc(t, key, '1.0', 'DoSomething', {}), -32601);
    expectRpcError(await rpc(t, key, '0.3', 'toString', {}), -32601);
    expectRpcError(await rpc(t, key, '1.0', '__proto__', {}), -32601);
    const v1WithoutHeader = expectRpcError(await rpc(t, key, '0.3', 'SendMessage', { message: userMessage('1.0', 'hi') }), -32601);
    expect(v1WithoutHeader.message).toMatch(/A2A-Version: 1\.0/);
    const v03With10 = expectRpcError(await rpc(t, key, '1.0', 'message/send', { message: userMessage('0.3', 'hi') }), -32601);
    expect(v03With10.message).toMatch(/0\.3/);
  });

  it.each(['2.0', '0.2', '1.1', '0.3-beta', 'latest', '1.0, 0.3'])('-32009 for A2A-Version "%s", on every method', async (version) => {
    for (const method of ['message/send', 'SendMessage', 'tasks/get', 'nope']) {
      const error = expectRpcError(await rpcRaw(t, key, { jsonrpc: '2.0', id: 1, method, params: {} }, { version }), -32009);
      expect(error.message).toContain(version);
    }
  });

  it.each([
    ['0.3', undefined],
    ['0.3', ''],
    ['0.3', '0.3'],
    ['0.3', '0.3.0'],
    ['1.0', '1.0'],
    ['1.0', '1'],
    ['1.0', '1.0.0'],
  ] as const)('A2A-Version %j selects the %s dialect', async (dialect, version) => {
    const method = METHODS[dialect].send;
    const res = await rpcRaw(t, key, { jsonrpc: '2.0', id: 1, method, params: { message: userMessage(dialect, 'which dialect?') } }, { version });
    expect(res.statusCode, res.body).toBe(200);
    const result = res.json().result;
    if (dialect === '0.3') expect(result).toMatchObject({ kind: 'task', status: { state: 'completed' } });
    else expect(result).toMatchObject({ task: { status: { state: 'TASK_STATE_COMPLETED' } } });
  });

  describe.each(['0.3', '1.0'] as Version[])('dialect %s', (version) => {
    const m = METHODS[version];
    const message = (extra: Record<string, unknown> = {}) => userMessage(version, 'hello', extra);

    it.each([
      ['no params', undefined],
      ['params as an array', [1, 2]],
      ['params as a string', 'hello'],
      ['no message', {}],
      ['a message that is not an object', { message: 'hello' }],
      ['no parts', { message: { role: version === '0.3' ? 'user' : 'ROLE_USER' } }],
      ['parts that are not an array', { message: { ...userMessage(version, 'x'), parts: 'hello' } }],
      ['a part that is not an object', { message: { ...userMessage(version, 'x'), parts: ['hello'] } }],
      ['no text part', { message: { ...userMessage(version, 'x'), parts: [version === '0.3' ? { kind: 'data', data: { a: 1 } } : { data: { a: 1 } }] } }],
      ['only a file part', { message: { ...userMessage(version, 'x'), parts: [version === '0.3' ? { kind: 'file', file: { uri: 'https://example.test/a.pdf' } } : { url: 'https://example.test/a.pdf' }] } }],
      ['empty text', { message: userMessage(version, '  ') }],
      ['text that is not a string', { message: { ...userMessage(version, 'x'), parts: [version === '0.3' ? { kind: 'text', text: 5 } : { text: 5 }] } }],
      ['an agent role', { message: { ...userMessage(version, 'x'), role: version === '0.3' ? 'agent' : 'ROLE_AGENT' } }],
      ['the other dialect\'s role', { message: { ...userMessage(version, 'x'), role: version === '0.3' ? 'ROLE_USER' : 'user' } }],
      ['metadata that is not an object', { message: message({ metadata: 'x' }) }],
      ['runtime_context that is not an object', { message: message({ metadata: { runtime_context: ['a'] } }) }],
      ['a contextId that is not a string', { message: message({ contextId: 5 }) }],
      ['a negative historyLength', { message: message(), configuration: { historyLength: -1 } }],
      ['configuration that is not an object', { message: message(), configuration: 'fast' }],
    ])(`${m.send}: -32602 for %s`, async (_case, params) => {
      expectRpcError(await rpc(t, key, version, m.send, params), -32602);
    });

    it(`${m.get}: -32602 without a task id; -32001 for unknown, malformed and other agents' task ids`, async () => {
      for (const params of [undefined, {}, { id: 5 }, { id: '' }, { id: 'x', historyLength: 'all' }]) expectRpcError(await rpc(t, key, version, m.get, params), -32602);
      const task = await send(t, key, version, 'mine');
      const other = await exposedAgent(t);
      const conversation = task.id.split('_')[1]!;
      for (const id of [`task_${'b'.repeat(24)}_1`, 'task_nope', `task_${conversation}_0`, `task_${conversation}_2`, `task_${conversation}_99`, `conv_${conversation}`, `${task.id}x`]) {
        const error = expectRpcError(await rpc(t, key, version, m.get, { id }), -32001);
        expect(error.message).toContain(id);
      }
      expectRpcError(await rpc(t, other, version, m.get, { id: task.id }), -32001);
      expect((await rpc(t, key, version, m.get, { id: task.id })).json().result.id).toBe(task.id);
    });

    it(`${m.cancel}: always -32004 (tasks complete synchronously), for real and unknown tasks alike`, async () => {
      const task = await send(t, key, version, 'cancel me');
      for (const id of [task.id, 'task_unknown']) {
        const error = expectRpcError(await rpc(t, key, version, m.cancel, { id }), -32004);
        expect(error.message).toMatch(/complete/);
      }
      expectRpcError(await rpc(t, key, version, m.cancel, []), -32602);
      expect((await rpc(t, key, version, m.get, { id: task.id })).json().result.status.state).toMatch(/completed/i);
    });

    it('streaming and the extended card are unsupported (-32004); push notification configs -32003', async () => {
      const streaming = version === '0.3' ? ['message/stream', 'tasks/resubscribe', 'agent/getAuthenticatedExtendedCard'] : ['SendStreamingMessage', 'SubscribeToTask', 'ListTasks', 'GetExtendedAgentCard'];
      for (const method of streaming) expectRpcError(await rpc(t, key, version, method, { message: message(), id: 'x' }), -32004);
      const push = version === '0.3' ? ['tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/get', 'tasks/pushNotificationConfig/list', 'tasks/pushNotificationConfig/delete'] : ['CreateTaskPushNotificationConfig', 'GetTaskPushNotificationConfig', 'ListTaskPushNotificationConfigs', 'DeleteTaskPushNotificationConfig'];
      for (const method of push) expectRpcError(await rpc(t, key, version, method, { id: 'x' }), -32003);
    });

    it(`-32603 for an unexpected failure: no internal detail reaches the caller, the log has it`, async () => {
      const task = await send(t, key, version, 'fine');
      const spy = vi.spyOn(t.ctx.services.agentRunner, 'messages').mockRejectedValueOnce(new Error('database exploded at /secret/path'));
      try {
        const error = expectRpcError(await rpc(t, key, version, m.get, { id: task.id }), -32603);
        expect(error).toEqual({ code: -32603, message: 'Internal error' });
      } finally {
        spy.mockRestore();
      }
      expect(t.logs.some((line) => line.includes('database exploded'))).toBe(true);
    });
  });
});
