import { parseClientJson } from '../../http/body.js';
import { AppError, ERRORS } from '../../http/errors.js';
import { compileBodyValidator, formatValidationError } from '../../http/validation.js';
import { isJsonObject } from '../../platform/text.js';
import type { JsonObject } from '../../providers/types.js';
import { ChatBody, EmbeddingsBody } from '../inference/schemas.js';

/** The endpoints a batch can target (interface 9.2: the `/v1/...` form). */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export const MAX_CUSTOM_ID_LENGTH = 512;

/** One request of a batch, validated: it becomes one item. */
export interface BatchLine {
  customId: string | null;
  body: JsonObject;
  /** 1-based: the array position for inline requests, the physical line of a JSONL file. */
  lineNumber: number;
}

/** Each line body is held to the rules of the endpoint it targets, the same schema a direct call is checked with. */
const bodyValidators = {
  '/v1/chat/completions': compileBodyValidator(ChatBody),
  '/v1/embeddings': compileBodyValidator(EmbeddingsBody),
};


export function lineError(lineNumber: number, problem: string): AppError {
  return ERRORS.validation(`Line ${lineNumber}: ${problem}`);
}

/** A value quoted for an error message, cut short: a refused line may hold megabytes. */
function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}

/** Interface 4.7 rules 2 and 3 first (each with its own message), then the endpoint's full body schema. */
function checkBody(endpoint: BatchEndpoint, body: unknown, lineNumber: number): JsonObject {
  if (!isJsonObject(body)) throw lineError(lineNumber, 'body must be a JSON object');
  if (typeof body.model !== 'string' || body.model === '') throw lineError(lineNumber, 'body.model is required (a model key of the project)');
  if (endpoint === '/v1/chat/completions' && !Array.isArray(body.messages)) {
    throw lineError(lineNumber, 'body.messages is required (an array of messages) for /v1/chat/completions');
  }
  if (endpoint === '/v1/embeddings' && (body.input === undefined || body.input === null)) {
    throw lineError(lineNumber, 'body.input is required for /v1/embeddings');
  }
  if (body.stream === true) throw lineError(lineNumber, 'body.stream: streaming is not supported in batches; remove stream or set it to false');
  const validate = bodyValidators[endpoint];
  if (!validate(body)) throw lineError(lineNumber, formatValidationError(validate.errors ?? [], 'body'));
  return body;
}

function checkCustomId(value: unknown, lineNumber: number): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw lineError(lineNumber, 'custom_id must be a string');
  if (value.length > MAX_CUSTOM_ID_LENGTH) throw lineError(lineNumber, `custom_id is longer than ${MAX_CUSTOM_ID_LENGTH} characters`);
  return value;
}

/** Interface 4.7 rule 4, for JSONL lines and inline requests that spell them out. */
function checkTarget(line: JsonObject, endpoint: BatchEndpoint, lineNumber: number): void {
  if (line.url !== undefined && line.url !== endpoint) {
    throw lineError(lineNumber, `url ${quoted(line.url)} does not match the batch endpoint ${endpoint}`);
  }
  if (line.method !== undefined && line.method !== 'POST') throw lineError(lineNumber, `method must be POST, got ${quoted(line.method)}`);
}

/**
 * An inline request `{ custom_id?, body }`; an object without a `body` key is the body itself (its `custom_id`, when
 * it has one, is taken out rather than sent to the model).
 */
export function inlineLine(endpoint: BatchEndpoint, value: unknown, lineNumber: number): BatchLine {
  if (!isJsonObject(value)) throw lineError(lineNumber, 'each request must be a JSON object');
  if (!('body' in value)) {
    const { custom_id: customId, ...body } = value;
    return { customId: checkCustomId(customId, lineNumber), body: checkBody(endpoint, body, lineNumber), lineNumber };
  }
  checkTarget(value, endpoint, lineNumber);
  return { customId: checkCustomId(value.custom_id, lineNumber), body: checkBody(endpoint, value.body, lineNumber), lineNumber };
}

/** One JSONL line `{ custom_id?, method?, url?, body }`. */
export function fileLine(endpoint: BatchEndpoint, text: string, lineNumber: number): BatchLine {
  let value: unknown;
  try {
    value = parseClientJson(text, `line ${lineNumber}`);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // Every refusal names its line (a lone surrogate, a NUL, as well as bad JSON), keeping its code.
    const message = err.code === 'invalid_json' ? err.message.replace('Request body', `Line ${lineNumber}`) : `Line ${lineNumber}: ${err.message}`;
    throw new AppError(err.statusCode, err.type, message, err.code);
  }
  if (!isJsonObject(value)) throw lineError(lineNumber, 'must be a JSON object { custom_id?, method?, url?, body }');
  if (!('body' in value)) throw lineError(lineNumber, 'body is required');
  checkTarget(value, endpoint, lineNumber);
  return { customId: checkCustomId(value.custom_id, lineNumber), body: checkBody(endpoint, value.body, lineNumber), lineNumber };
}

/** Lines that are empty or only whitespace are skipped (a trailing newline, blank separators). */
export function isBlank(text: string): boolean {
  return text.trim() === '';
}

const NEWLINE = 0x0a;

/**
 * The lines of a UTF-8 JSONL stream, numbered from 1, at most `maxLines` request lines (blank lines are not
 * counted). Not UTF-8, a line that is not a valid request, or one line too many: a 400 naming the problem.
 */
export async function* jsonlLines(chunks: AsyncIterable<Buffer>, endpoint: BatchEndpoint, maxLines: number): AsyncGenerator<BatchLine> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  // The line not ended yet, in pieces: joining them only at its end keeps a long line linear, not quadratic.
  let unended: string[] = [];
  let lineNumber = 0;
  let requests = 0;
  const take = (text: string): BatchLine | null => {
    lineNumber++;
    const line = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (isBlank(line)) return null;
    if (++requests > maxLines) throw tooManyLines(maxLines);
    return fileLine(endpoint, line, lineNumber);
  };
  try {
    for await (const chunk of chunks) {
      // Split on the newline byte, then decoded line by line (a newline byte is never part of a multi-byte
      // character): bytes that are not UTF-8 are reported on their own line.
      let start = 0;
      for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
        unended.push(decoder.decode(chunk.subarray(start, end)));
        const line = take(unended.join(''));
        unended = [];
        start = end + 1;
        if (line) yield line;
      }
      if (start < chunk.length) unended.push(decoder.decode(chunk.subarray(start), { stream: true }));
    }
    const last = take(unended.join('') + decoder.decode());
    if (last) yield last;
  } catch (err) {
    if (err instanceof TypeError && (err as { code?: string }).code === 'ERR_ENCODING_INVALID_ENCODED_DATA') {
      throw ERRORS.validation(`The input file is not valid UTF-8 (near line ${lineNumber + 1})`);
    }
    throw err;
  }
}

export function tooManyLines(maxLines: number): AppError {
  return ERRORS.validation(`The batch has more than ${maxLines} request lines (the maximum, WAYGATE_BATCH_MAX_LINES)`);
}

/** What is wrong with a line found only by looking at others (a reused custom_id, a model of the batch). */
export interface LineProblem {
  lineNumber: number;
  problem: string;
}

/** custom_id identifies a result line, so two lines may not share one (as with OpenAI's batches). */
export function reusedCustomId(lines: BatchLine[]): LineProblem | null {
  const seen = new Map<string, number>();
  for (const line of lines) {
    if (line.customId === null) continue;
    const first = seen.get(line.customId);
    if (first !== undefined) return { lineNumber: line.lineNumber, problem: `custom_id ${quoted(line.customId)} is already used by line ${first}` };
    seen.set(line.customId, line.lineNumber);
  }
  return null;
}
