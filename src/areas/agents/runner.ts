import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { timeOrderedId } from '../../platform/ids.js';
import type { UpstreamClient } from '../../providers/http.js';
import { estimateChatInput, estimateTokens } from '../../providers/tokens.js';
import type { JsonObject } from '../../providers/types.js';
import type { GuardrailEvaluator } from '../guardrails/evaluator.js';
import type { GuardrailService } from '../guardrails/service.js';
import type { Caller, InferenceService } from '../inference/service.js';
import type { UsageService } from '../usage/service.js';
import { callConnection, runtimeHeaders, type TurnMessage } from './connectors.js';
import type { AgentService } from './service.js';
import type { AgentRecord, AgentStore, ConversationRecord, MessageRecord, VersionRecord } from './store.js';

/** One turn asked of an agent: new messages, in a new or an existing conversation. */
export interface TurnRequest {
  input: TurnMessage[];
  /** Continue this conversation (it must be one held with this agent, in this project). */
  conversationId?: string;
  /** Pin a published version; the newest otherwise. */
  version?: number;
  /** Caller runtime context (A2A `metadata.runtime_context`): for the model as context, for connected agents as headers. */
  runtimeContext?: Record<string, unknown>;
}

export interface TurnResult {
  version: VersionRecord;
  conversationId: string;
  /** Whether the turn continued a conversation (false: it started one). */
  continued: boolean;
  /** The assistant message as stored (its `seq` is its position in the conversation). */
  reply: MessageRecord;
}

/**
 * Runs agents (interface 2.5, 4.1): a turn resolves the published version, continues or starts the stored
 * conversation, runs a native agent through the inference core (its model's guardrails, metering and budgets apply)
 * or calls a connected one, applies the agent's own guardrails, and stores the turn with its usage and version.
 */
export class AgentRunner {
  constructor(
    private readonly agents: AgentService,
    private readonly store: AgentStore,
    private readonly inference: InferenceService,
    private readonly guardrails: GuardrailService,
    private readonly evaluator: GuardrailEvaluator,
    private readonly upstream: UpstreamClient,
    private readonly usage: UsageService,
  ) {}

  async respond(caller: Caller, agent: AgentRecord, request: TurnRequest): Promise<TurnResult> {
    if (agent.status !== 'active') throw ERRORS.validation(`Agent "${agent.key}" is ${agent.status}; only active agents answer`);
    if (request.input.length === 0) throw ERRORS.validation('input is required: a text or at least one message');
    const version = await this.agents.versionToRun(agent, request.version);
    const conversation = request.conversationId ? await this.conversation(caller.scope, agent, request.conversationId) : null;
    const history = conversation ? await this.store.messages(conversation.id) : [];
    const runCaller: Caller = { ...caller, service: 'agents' };
    const input = await this.guard(runCaller, agent, version.config.inputGuardrailKey, 'input', request.input);
    const answer = version.config.kind === 'native' ? await this.runNative(runCaller, agent, version, history, input, request.runtimeContext) : await this.runConnected(runCaller, agent, version, conversation, history, input, request.runtimeContext);
    const [reply] = await this.guard(runCaller, agent, version.config.outputGuardrailKey, 'output', [{ role: 'assistant', content: answer.text }]);
    const now = Date.now();
    const target = conversation ?? (await this.store.createConversation(caller.scope, agent.id, now));
    const stored = await this.store.append(
      target,
      [
        ...input.map((m) => ({ role: m.role === 'assistant' ? ('assistant' as const) : ('user' as const), content: m.content, usage: null, version: null, createdAt: now })),
        { role: 'assistant' as const, content: reply!.content, usage: answer.usage, version: version.number, createdAt: now },
      ],
      answer.remoteContext,
    );
    return { version, conversationId: target.id, continued: conversation !== null, reply: stored.at(-1)! };
  }

  /** A conversation held with this agent in this project; anything else is a 404 like a missing one. */
  async conversation(scope: ProjectScope, agent: AgentRecord, id: string): Promise<ConversationRecord> {
    const conversation = await this.store.conversation(scope, agent.id, id);
    if (!conversation) throw ERRORS.notFound('Conversation', id);
    return conversation;
  }

  /** The stored messages of a conversation (A2A rebuilds tasks from them). */
  messages(conversation: ConversationRecord): Promise<MessageRecord[]> {
    return this.store.messages(conversation.id);
  }

  /** The agent's own guardrail for a stage, over the messages (redacted ones come back redacted). */
  private async guard(caller: Caller, agent: AgentRecord, key: string | null, stage: 'input' | 'output', messages: TurnMessage[]): Promise<TurnMessage[]> {
    if (!key) return messages;
    // Deletion of a guardrail an agent names is not refused (agents live in the client API): fail closed instead.
    const guardrail = await this.guardrails.get(caller.scope, key).catch(() => null);
    if (!guardrail) throw ERRORS.guardrailMissing(agent.key, key);
    if (!guardrail.enabled) return messages;
    const context = { scope: caller.scope, requestId: caller.requestId, stage, model: `agent:${agent.key}`, judge: this.inference.judge(caller) };
    const { texts } = await this.evaluator.enforce(context, [guardrail], messages.map((m) => ({ text: m.content, trusted: m.role === 'system' })));
    return messages.map((m, i) => ({ ...m, content: texts[i]! }));
  }

  /** A native agent: its system prompt, the runtime context, the conversation and the new messages, to its model. */
  private async runNative(caller: Caller, agent: AgentRecord, version: VersionRecord, history: MessageRecord[], input: TurnMessage[], runtimeContext?: Record<string, unknown>) {
    const config = version.config;
    if (!config.modelKey) throw ERRORS.validation(`Agent "${agent.key}" version ${version.number} has no modelKey; set one and publish again`);
    const messages: JsonObject[] = [];
    if (config.systemPrompt) messages.push({ role: 'system', content: config.systemPrompt });
    if (runtimeContext && Object.keys(runtimeContext).length > 0) messages.push({ role: 'system', content: `Runtime context from the caller (JSON): ${JSON.stringify(runtimeContext)}` });
    for (const m of [...history, ...input]) messages.push({ role: m.role, content: m.content });
    const body: JsonObject = {
      model: config.modelKey,
      messages,
      ...(config.temperature !== null ? { temperature: config.temperature } : {}),
      ...(config.topP !== null ? { top_p: config.topP } : {}),
      ...(config.maxTokens !== null ? { max_tokens: config.maxTokens } : {}),
    };
    const answer = await this.inference.chat(caller, body);
    const content = (answer.body.choices as { message?: { content?: unknown } }[] | undefined)?.[0]?.message?.content;
    return { text: typeof content === 'string' ? content : '', usage: { inputTokens: answer.usage.inputTokens, outputTokens: answer.usage.outputTokens }, remoteContext: undefined };
  }

  /** A connected agent, metered as one usage event (its tokens as it reports them, or counted). */
  private async runConnected(caller: Caller, agent: AgentRecord, version: VersionRecord, conversation: ConversationRecord | null, history: MessageRecord[], input: TurnMessage[], runtimeContext?: Record<string, unknown>) {
    const connection = version.config.connection!;
    const messages: TurnMessage[] = [...history.map((m) => ({ role: m.role, content: m.content })), ...input];
    const started = performance.now();
    let status = 200;
    let usage: { inputTokens: number; outputTokens: number } | null = null;
    try {
      const answer = await callConnection(this.upstream, connection, this.agents.secretsOf(version), {
        messages,
        input,
        remoteContext: conversation?.remoteContext ?? null,
        runtimeHeaders: runtimeHeaders(runtimeContext),
        signal: caller.signal,
        requestId: caller.requestId,
      });
      usage = answer.usage ?? { inputTokens: estimateChatInput({ messages }), outputTokens: estimateTokens(answer.text) };
      return { text: answer.text, usage, remoteContext: answer.remoteContext ?? undefined };
    } catch (err) {
      status = (err as { statusCode?: number }).statusCode ?? 500;
      throw err;
    } finally {
      this.meter(caller, agent, connection.protocol, usage, status, performance.now() - started);
    }
  }

  private meter(caller: Caller, agent: AgentRecord, protocol: string, usage: { inputTokens: number; outputTokens: number } | null, status: number, ms: number): void {
    const now = Date.now();
    this.usage.record({
      id: timeOrderedId('use', now),
      tenantId: caller.scope.tenantId,
      projectId: caller.scope.projectId,
      tokenId: caller.tokenId,
      userId: caller.userId,
      model: `agent:${agent.key}`,
      provider: protocol,
      service: 'agents',
      endpoint: '/agents/responses',
      inputTokens: usage?.inputTokens ?? 0,
      outputTokens: usage?.outputTokens ?? 0,
      cost: 0,
      currency: 'USD',
      latencyMs: performance.now() - caller.startedAt,
      upstreamLatencyMs: ms,
      status,
      requestId: caller.requestId,
      sessionId: caller.sessionId,
      streamed: false,
      createdAt: now,
    });
  }
}
