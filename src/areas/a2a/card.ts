import type { AgentRecord } from '../agents/store.js';
import type { Dialect } from './protocol.js';

const TEXT = ['text/plain'];
const BEARER_DESCRIPTION = 'A Waygate API token of the agent\'s project: Authorization: Bearer wgt_...';

/** What the card is made from: the agent, its published version and its JSON-RPC URL. */
export interface CardSource {
  agent: AgentRecord;
  publishedVersion: number | null;
  /** This agent's JSON-RPC endpoint, as the caller reached it. */
  url: string;
}

function skill({ agent }: CardSource) {
  return {
    id: agent.key,
    name: agent.name,
    description: agent.description ?? `Converse with the ${agent.name} agent`,
    tags: ['agent', 'chat', agent.config.kind],
    inputModes: TEXT,
    outputModes: TEXT,
  };
}

/** Both dialects, JSON-RPC on the same URL, 1.0 first (the one a 1.0 client picks). */
function supportedInterfaces(url: string) {
  return [
    { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
  ];
}

function common(source: CardSource) {
  const { agent, publishedVersion } = source;
  return {
    name: agent.name,
    description: agent.description ?? `Waygate agent ${agent.name}`,
    version: String(publishedVersion ?? 0),
  };
}

/**
 * The A2A 1.0 Agent Card (proto JSON): interfaces in `supportedInterfaces`, the bearer scheme as
 * `httpAuthSecurityScheme`, requirements as `securityRequirements`.
 */
function cardV1(source: CardSource) {
  return {
    ...common(source),
    supportedInterfaces: supportedInterfaces(source.url),
    capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: false },
    securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer', description: BEARER_DESCRIPTION } } },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: TEXT,
    defaultOutputModes: TEXT,
    skills: [skill(source)],
  };
}

/**
 * The card for 0.3 clients: the 0.3 fields (`url`, `protocolVersion`, `preferredTransport`, `additionalInterfaces`,
 * OpenAPI-style `securitySchemes` and `security`) with the 1.0 `supportedInterfaces` kept alongside, the hybrid the
 * official SDK serves, so a 1.0 client that reads it still finds the 1.0 interface.
 */
function cardV03(source: CardSource) {
  return {
    ...common(source),
    protocolVersion: '0.3.0',
    url: source.url,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: source.url, transport: 'JSONRPC' }],
    supportedInterfaces: supportedInterfaces(source.url),
    capabilities: { streaming: false, pushNotifications: false },
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: BEARER_DESCRIPTION } },
    security: [{ bearer: [] }],
    defaultInputModes: TEXT,
    defaultOutputModes: TEXT,
    skills: [skill(source)],
    supportsAuthenticatedExtendedCard: false,
  };
}

/** The Agent Card for the dialect the request names (`A2A-Version`; absent or unsupported gets the 0.3 card). */
export function agentCard(source: CardSource, dialect: Dialect | null) {
  return dialect === '1.0' ? cardV1(source) : cardV03(source);
}
