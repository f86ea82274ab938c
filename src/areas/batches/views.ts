import { unixSeconds } from '../../platform/time.js';
import type { BatchRecord, ItemRecord, ResultRow } from './store.js';

function seconds(ms: number | null): number | null {
  return ms === null ? null : unixSeconds(ms);
}

/** The batch object (interface 2.1). */
export function batchView(batch: BatchRecord) {
  const { inputTokens, outputTokens } = batch.usage;
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    status: batch.status,
    completion_window: batch.completionWindow,
    input_file: batch.inputFile ? { bucket_key: batch.inputFile.bucketKey, object_key: batch.inputFile.objectKey } : null,
    // The object key is filled in by the finalizer once the results are written.
    output_file: batch.outputBucketKey ? { bucket_key: batch.outputBucketKey, object_key: batch.outputObjectKey } : null,
    error_message: batch.errorMessage,
    request_counts: { ...batch.counts },
    usage: { input_tokens: inputTokens, output_tokens: outputTokens, total_tokens: inputTokens + outputTokens },
    metadata: batch.metadata,
    created_at: unixSeconds(batch.createdAt),
    started_at: seconds(batch.startedAt),
    completed_at: seconds(batch.completedAt),
    cancelled_at: seconds(batch.cancelledAt),
  };
}

/** The batch item object (interface 2.2); `response_status_code` is 0 until the item has run. */
export function itemView(item: ItemRecord) {
  return {
    id: item.id,
    object: 'batch.item' as const,
    index: item.index,
    custom_id: item.customId,
    status: item.status,
    response_status_code: item.responseStatusCode ?? 0,
    response_body: item.responseBody === null ? null : (JSON.parse(item.responseBody) as Record<string, unknown>),
    error_message: item.errorMessage,
    usage: item.usage && {
      input_tokens: item.usage.inputTokens,
      output_tokens: item.usage.outputTokens,
      total_tokens: item.usage.inputTokens + item.usage.outputTokens,
    },
    started_at: seconds(item.startedAt),
    ended_at: seconds(item.endedAt),
  };
}

/**
 * One result line (interface 2.3) with its newline. Built as text around the stored body, which is already JSON on
 * one line: results of big batches stream without parsing a single answer.
 */
export function resultLine(row: ResultRow): string {
  const head = `{"id":${JSON.stringify(`batch_req_${row.id}`)},"custom_id":${JSON.stringify(row.customId)}`;
  if (row.status === 'succeeded') {
    return `${head},"response":{"status_code":${row.responseStatusCode},"body":${row.responseBody ?? 'null'}},"error":null}\n`;
  }
  const error = JSON.stringify({ code: row.status, message: row.errorMessage ?? 'The request failed' });
  return `${head},"response":{"status_code":${row.responseStatusCode},"body":null},"error":${error}}\n`;
}
