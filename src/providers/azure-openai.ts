import type { UpstreamClient } from './http.js';
import { joinUrl, OpenAiStyleProvider } from './openai-compatible.js';
import type { Provider } from './types.js';

/** The GA data-plane version used when a model names none. */
export const AZURE_DEFAULT_API_VERSION = '2024-10-21';

/**
 * Azure OpenAI: `{baseUrl}/openai/deployments/{deployment}/{operation}?api-version=...` with an `api-key` header.
 * The deployment defaults to the upstream model name, as Azure's own SDKs do.
 */
export function azureOpenAi(client: UpstreamClient): Provider {
  return new OpenAiStyleProvider(client, {
    url: (target, operation) => {
      const deployment = encodeURIComponent(target.deployment ?? target.upstreamModel);
      const version = encodeURIComponent(target.apiVersion ?? AZURE_DEFAULT_API_VERSION);
      return `${joinUrl(target.baseUrl ?? '', `openai/deployments/${deployment}/${operation}`)}?api-version=${version}`;
    },
    authHeaders: (target): Record<string, string> => (target.apiKey ? { 'api-key': target.apiKey } : {}),
  });
}
