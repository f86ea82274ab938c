import { anthropic } from './anthropic.js';
import { azureOpenAi } from './azure-openai.js';
import type { UpstreamClient } from './http.js';
import { local } from './local.js';
import { mock } from './mock.js';
import { openAiCompatible } from './openai-compatible.js';
import type { Provider, ProviderType } from './types.js';

/** One provider per upstream kind, built once at start around the shared connection pools. */
export function createProviders(client: UpstreamClient): Record<ProviderType, Provider> {
  return {
    'openai-compatible': openAiCompatible(client),
    'azure-openai': azureOpenAi(client),
    anthropic: anthropic(client),
    local: local(),
    mock: mock(),
  };
}
