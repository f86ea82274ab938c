import { AppError, ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import type { AgentRunner } from '../agents/runner.js';
import { a2aEnabled, checkActive, type AgentService } from '../agents/service.js';
import type { AgentRecord, ConversationRecord } from '../agents/store.js';
import type { Caller } from '../inference/service.js';
import { agentCard } from './card.js';
import {
  paramsObject,
  parseEnvelope,
  parseTaskId,
  readGetRequest,
  readSendRequest,
  rpcError,
  rpcErrorOf,
  RPC_ERRORS,
  rpcResult,
  RpcError,
  type Dialect,
  type RpcRequest,
  type RpcResponse,
} from './protocol.js';
import { taskView, turnOf } from './tasks.js';

/** Where failures of a run are reported (a request's logger). */
export interface RpcLog {
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface RpcCall {
  caller: Caller;
  agent: AgentRecord;
  /** The dialect the `A2A-Version` header asks for; null when it names a version not served. */
  dialect: Dialect | null;
  /** The header's value, for the -32009 message. */
  requestedVersion: string;
  /** The raw request body. */
  body: unknown;
  log: RpcLog;
  /** Throws when the caller may not call models (a turn calls the agent's model; reading a task does not). */
  checkModelCalls: () => void;
}

type Operation = 'send' | 'get' | 'cancel';

/** The methods of each dialect: the three operations, and the A2A methods of capabilities this agent lacks. */
const METHODS: Record<Dialect, Record<string, Operation | RpcError>> = {
  '0.3': {
    'message/send': 'send',
    'tasks/get': 'get',
    'tasks/cancel': 'cancel',
    'message/stream': RPC_ERRORS.unsupported('streaming is not supported (capabilities.streaming is false); use message/send'),
    'tasks/resubscribe': RPC_ERRORS.unsupported('streaming is not supported (capabilities.streaming is false); use tasks/get'),
    'tasks/pushNotificationConfig/set': RPC_ERRORS.pushNotSupported(),
    'tasks/pushNotificationConfig/get': RPC_ERRORS.pushNotSupported(),
    'tasks/pushNotificationConfig/list': RPC_ERRORS.pushNotSupported(),
    'tasks/pushNotificationConfig/delete': RPC_ERRORS.pushNotSupported(),
    'agent/getAuthenticatedExtendedCard': RPC_ERRORS.unsupported('there is no extended agent card'),
  },
  '1.0': {
    SendMessage: 'send',
    GetTask: 'get',
    CancelTask: 'cancel',
    SendStreamingMessage: RPC_ERRORS.unsupported('streaming is not supported (capabilities.streaming is false); use SendMessage'),
    SubscribeToTask: RPC_ERRORS.unsupported('streaming is not supported (capabilities.streaming is false); use GetTask'),
    ListTasks: RPC_ERRORS.unsupported('ListTasks is not supported; keep the task ids SendMessage returns'),
    CreateTaskPushNotificationConfig: RPC_ERRORS.pushNotSupported(),
    GetTaskPushNotificationConfig: RPC_ERRORS.pushNotSupported(),
    ListTaskPushNotificationConfigs: RPC_ERRORS.pushNotSupported(),
    DeleteTaskPushNotificationConfig: RPC_ERRORS.pushNotSupported(),
    GetExtendedAgentCard: RPC_ERRORS.unsupported('there is no extended agent card'),
  },
};

/** A method of the other dialect: named in the -32601 message, with the header that selects it. */
function otherDialectHint(dialect: Dialect, method: string): string {
  const other: Dialect = dialect === '0.3' ? '1.0' : '0.3';
  if (!Object.hasOwn(METHODS[other], method)) return '';
  return dialect === '0.3'
    ? ` (an A2A 1.0 method: send the header A2A-Version: 1.0; without it the request is read as A2A 0.3)`
    : ` (an A2A 0.3 method: send A2A-Version: 0.3 or no A2A-Version header)`;
}

/**
 * The A2A server (interface 4.1 rules 1-3): exposure, the Agent Card, and JSON-RPC dispatch onto the agent runner.
 * A message is one turn of a stored conversation; the task it returns is rebuilt from that conversation later.
 */
export class A2aService {
  constructor(
    private readonly agents: AgentService,
    private readonly runner: AgentRunner,
  ) {}

  /** An agent exposed over A2A (`metadata.a2a.enabled`); a missing or non-exposed one is the same 404. */
  async exposedAgent(scope: ProjectScope, key: string): Promise<AgentRecord> {
    const agent = await this.agents.get(scope, key);
    if (!a2aEnabled(agent)) throw ERRORS.notFound('Agent', key);
    return agent;
  }

  /** An exposed agent that may be invoked: 404 as above, 400 when it is not active (before any dispatch). */
  async invocableAgent(scope: ProjectScope, key: string): Promise<AgentRecord> {
    const agent = await this.exposedAgent(scope, key);
    checkActive(agent);
    return agent;
  }

  async card(agent: AgentRecord, dialect: Dialect | null, url: string) {
    return agentCard({ agent, publishedVersion: await this.agents.publishedVersion({ tenantId: agent.tenantId, projectId: agent.projectId }, agent), url }, dialect);
  }

  /** One JSON-RPC request: always an envelope with `result` or `error` (HTTP 200). */
  async handle(call: RpcCall): Promise<RpcResponse> {
    const { id, request, error } = parseEnvelope(call.body);
    if (!request) return rpcError(id, error!);
    try {
      if (call.dialect === null) throw RPC_ERRORS.versionNotSupported(call.requestedVersion);
      return rpcResult(id, await this.dispatch(call, call.dialect, request));
    } catch (err) {
      return rpcError(id, this.toRpcError(err, call.log));
    }
  }

  private async dispatch(call: RpcCall, dialect: Dialect, request: RpcRequest): Promise<unknown> {
    const operation = Object.hasOwn(METHODS[dialect], request.method) ? METHODS[dialect][request.method]! : undefined;
    if (operation === undefined) throw RPC_ERRORS.methodNotFound(request.method, otherDialectHint(dialect, request.method));
    if (operation instanceof RpcError) throw operation;
    switch (operation) {
      case 'send': {
        call.checkModelCalls();
        const task = await this.send(call, dialect, request.params);
        return dialect === '1.0' ? { task } : task;
      }
      case 'get': {
        const { id, historyLength } = readGetRequest(request.params, dialect);
        return this.task(call, dialect, id, historyLength);
      }
      case 'cancel':
        paramsObject(request.params);
        throw RPC_ERRORS.unsupported('tasks complete within the request that starts them, so there is nothing to cancel');
    }
  }

  /**
   * `message/send` / `SendMessage`: the text becomes the user input of a turn; `contextId` (a conversation id)
   * continues that conversation, none starts one. A `taskId` names a finished task, which takes no more messages.
   */
  private async send(call: RpcCall, dialect: Dialect, params: unknown) {
    const message = readSendRequest(params, dialect);
    const { caller, agent } = call;
    if (message.taskId !== undefined) {
      await this.turn(caller.scope, agent, message.taskId);
      throw RPC_ERRORS.unsupported(`task ${message.taskId} is completed and takes no more messages; send a new message with its contextId to continue the conversation`);
    }
    if (message.contextId !== undefined) await this.checkContext(caller.scope, agent, message.contextId);
    // Failures of the run (AppError: guardrail blocks, budgets, upstream errors) are mapped in toRpcError.
    const turn = await this.runner.respond(caller, agent, {
      input: [{ role: 'user', content: message.text }],
      conversationId: message.contextId,
      runtimeContext: message.runtimeContext,
      endpoint: '/a2a',
    });
    // The task is the turn just stored: the same messages tasks/get rebuilds from the conversation later.
    return taskView(dialect, turn.conversationId, turn.messages, message.historyLength);
  }

  /** `tasks/get` / `GetTask`: the task rebuilt from the stored conversation. */
  private async task(call: RpcCall, dialect: Dialect, taskId: string, historyLength?: number) {
    const { conversation, messages } = await this.turn(call.caller.scope, call.agent, taskId);
    return taskView(dialect, conversation.id, messages, historyLength);
  }

  /** The turn a task id names, in a conversation of this agent and project; anything else is -32001. */
  private async turn(scope: ProjectScope, agent: AgentRecord, taskId: string) {
    const parsed = parseTaskId(taskId);
    if (!parsed) throw RPC_ERRORS.taskNotFound(taskId);
    const conversation = await this.heldConversation(scope, agent, parsed.conversationId);
    const messages = conversation ? turnOf(await this.runner.messages(scope, conversation), parsed.seq) : null;
    if (!conversation || !messages) throw RPC_ERRORS.taskNotFound(taskId);
    return { conversation, messages };
  }

  /** A `contextId` must be a conversation this agent holds in this project: -32602 otherwise. */
  private async checkContext(scope: ProjectScope, agent: AgentRecord, contextId: string): Promise<void> {
    if (!(await this.heldConversation(scope, agent, contextId))) {
      throw RPC_ERRORS.invalidParams(`contextId "${contextId}" is not a conversation of this agent; leave it out to start a new conversation`);
    }
  }

  /** A conversation this agent holds in this project, or null (the runner's 404, as a value). */
  private heldConversation(scope: ProjectScope, agent: AgentRecord, id: string): Promise<ConversationRecord | null> {
    return this.runner.conversation(scope, agent, id).catch((err: unknown) => {
      if (err instanceof AppError && err.statusCode === 404) return null;
      throw err;
    });
  }

  /** Protocol errors as they are; expected failures with their message; anything else logged and kept opaque. */
  private toRpcError(err: unknown, log: RpcLog): RpcError {
    if (err instanceof RpcError) return err;
    if (err instanceof AppError) {
      // 502 and 504 are an upstream's failure, as the HTTP error handler sees them: a warning.
      if (err.statusCode >= 500) log.warn({ err }, 'A2A agent run failed');
      return rpcErrorOf(err);
    }
    log.error({ err }, 'A2A request failed');
    return RPC_ERRORS.internal();
  }
}
