import { describe, expect, it } from 'vitest';
import { outputLimitField } from '../../src/providers/openai-compatible.js';

describe('outputLimitField: the field a budget cap is written to when the client named none', () => {
  it.each([
    [{ type: 'openai-compatible', baseUrl: 'https://api.openai.com/v1' }, 'max_completion_tokens'],
    [{ type: 'openai-compatible', baseUrl: 'https://API.OpenAI.com/v1/' }, 'max_completion_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com' }, 'max_completion_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: '2024-10-21' }, 'max_completion_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: '2024-09-01-preview' }, 'max_completion_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: 'preview' }, 'max_completion_tokens'],
    // Older versions refuse max_completion_tokens with a 400.
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: '2024-08-01-preview' }, 'max_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: '2024-06-01' }, 'max_tokens'],
    [{ type: 'azure-openai', baseUrl: 'https://example.openai.azure.com', apiVersion: '2023-05-15' }, 'max_tokens'],
    [{ type: 'openai-compatible', baseUrl: 'http://127.0.0.1:8000/v1' }, 'max_tokens'],
    [{ type: 'openai-compatible', baseUrl: 'https://api.openai.com.example.net/v1' }, 'max_tokens'],
    [{ type: 'openai-compatible', baseUrl: 'not a url' }, 'max_tokens'],
    [{ type: 'openai-compatible', baseUrl: null }, 'max_completion_tokens'], // no baseUrl: OpenAI's API
    [{ type: 'anthropic', baseUrl: 'https://api.anthropic.com' }, 'max_tokens'],
    [{ type: 'local', baseUrl: null }, 'max_tokens'],
  ] as const)('%o -> %s', (target, field) => {
    expect(outputLimitField({ apiVersion: null, ...target })).toBe(field);
  });
});
