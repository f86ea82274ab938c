import type { MessageRecord } from '../agents/store.js';
import { artifactIdOf, messageIdOf, taskIdOf, type Dialect } from './protocol.js';

/**
 * Tasks as each dialect shows them. A task is one turn of a stored conversation: the user message(s) since the
 * agent's previous reply, and the reply. It is always terminal (`completed`): runs finish within the request.
 *
 * 0.3: `{ kind: 'task', id, contextId, status: { state: 'completed', message, timestamp }, artifacts: [{ artifactId,
 * name, parts: [{ kind: 'text', text }] }], history: [{ kind: 'message', messageId, role: 'user' | 'agent', parts,
 * contextId, taskId }], metadata }`.
 * 1.0 (proto JSON): the same without `kind`, `state: 'TASK_STATE_COMPLETED'`, roles `ROLE_USER` / `ROLE_AGENT`,
 * parts `{ text }`.
 */

/** A reply of the agent: an assistant message the agent produced (input items given as assistant have no version). */
function isReply(message: MessageRecord): boolean {
  return message.role === 'assistant' && message.version !== null;
}

/** The turn that ends with the reply at `seq`: the messages after the previous reply, up to and including it. */
export function turnOf(messages: MessageRecord[], seq: number): MessageRecord[] | null {
  const end = messages.findIndex((m) => m.seq === seq);
  if (end < 0 || !isReply(messages[end]!)) return null;
  let start = end;
  while (start > 0 && !isReply(messages[start - 1]!)) start--;
  return messages.slice(start, end + 1);
}

function textPart(dialect: Dialect, text: string) {
  return dialect === '0.3' ? { kind: 'text' as const, text } : { text };
}

function messageView(dialect: Dialect, conversationId: string, taskId: string, message: MessageRecord) {
  // A2A has two roles: system messages a Responses caller sent show as the user's.
  const agent = message.role === 'assistant';
  return {
    ...(dialect === '0.3' ? { kind: 'message' as const } : {}),
    messageId: messageIdOf(conversationId, message.seq),
    contextId: conversationId,
    taskId,
    role: dialect === '0.3' ? (agent ? 'agent' : 'user') : agent ? 'ROLE_AGENT' : 'ROLE_USER',
    parts: [textPart(dialect, message.content)],
  };
}

/** The task of a turn, with at most `historyLength` history messages (all when unset, none for 0). */
export function taskView(dialect: Dialect, conversationId: string, turn: MessageRecord[], historyLength?: number) {
  const reply = turn.at(-1)!;
  const taskId = taskIdOf(conversationId, reply.seq);
  const history = turn.map((message) => messageView(dialect, conversationId, taskId, message));
  const shown = historyLength === undefined ? history : historyLength === 0 ? [] : history.slice(-historyLength);
  return {
    ...(dialect === '0.3' ? { kind: 'task' as const } : {}),
    id: taskId,
    contextId: conversationId,
    status: {
      state: dialect === '0.3' ? 'completed' : 'TASK_STATE_COMPLETED',
      message: history.at(-1)!,
      timestamp: new Date(reply.createdAt).toISOString(),
    },
    artifacts: [{ artifactId: artifactIdOf(conversationId, reply.seq), name: 'reply', parts: [textPart(dialect, reply.content)] }],
    ...(shown.length > 0 ? { history: shown } : {}),
    metadata: {
      agentVersion: reply.version,
      usage: reply.usage ?? { inputTokens: 0, outputTokens: 0 },
    },
  };
}
