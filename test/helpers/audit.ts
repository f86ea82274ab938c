import type { AuditEvent } from '../../src/areas/audit/store.js';
import { newId } from '../../src/platform/ids.js';

/** A complete audit event for seeding stores and buffers; tests override what they look at. */
export function auditEvent(overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    id: newId('aud'),
    tenantId: 'ten_x',
    projectId: null,
    requestId: 'req-1',
    actorType: 'system',
    actorUserId: null,
    apiTokenId: null,
    service: 'tokens',
    action: 'tokens.create',
    method: 'POST',
    path: '/api/tokens',
    statusCode: 201,
    outcome: 'success',
    ipAddress: '127.0.0.1',
    userAgent: null,
    resourceType: null,
    resourceId: null,
    createdAt: Date.now(),
    ...overrides,
  };
}
