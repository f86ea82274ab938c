import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { projectScope, requireApiToken, requireSession } from '../../http/guards.js';
import { pageSize } from '../../platform/time.js';
import { callerOf } from '../inference/caller.js';
import {
  createGuardrailSchema,
  deleteGuardrailSchema,
  evaluateSchema,
  evaluationsSchema,
  listGuardrailsSchema,
  updateGuardrailSchema,
  type CreateGuardrailBody,
  type EvaluateBody,
  type UpdateGuardrailBody,
} from './schemas.js';
import { guardrailView } from './service.js';

/** Guardrail configuration (dashboard API, project-scoped). */
export async function guardrailRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { guardrails, guardrailEvaluator } = ctx.services;
  requireSession(app, ctx.services.auth);

  app.get('/api/guardrails', { schema: listGuardrailsSchema }, async (request) => ({
    guardrails: (await guardrails.list(projectScope(request))).map(guardrailView),
  }));

  app.post<{ Body: Static<typeof CreateGuardrailBody> }>('/api/guardrails', { schema: createGuardrailSchema }, async (request, reply) => {
    const guardrail = await guardrails.create(projectScope(request), request.body);
    request.auditResource = { type: 'guardrail', id: guardrail.key };
    return reply.status(201).send({ guardrail: guardrailView(guardrail) });
  });

  app.patch<{ Params: { key: string }; Body: Static<typeof UpdateGuardrailBody> }>('/api/guardrails/:key', { schema: updateGuardrailSchema }, async (request) => {
    request.auditResource = { type: 'guardrail', id: request.params.key };
    return { guardrail: guardrailView(await guardrails.update(projectScope(request), request.params.key, request.body)) };
  });

  app.delete<{ Params: { key: string } }>('/api/guardrails/:key', { schema: deleteGuardrailSchema }, async (request) => {
    request.auditResource = { type: 'guardrail', id: request.params.key };
    await guardrails.delete(projectScope(request), request.params.key);
    return { success: true as const };
  });

  app.get<{ Params: { key: string }; Querystring: { limit?: number } }>('/api/guardrails/:key/evaluations', { schema: evaluationsSchema }, async (request) => {
    const found = await guardrailEvaluator.evaluations(projectScope(request), request.params.key, pageSize(request.query.limit, 50, 500));
    return {
      stats: { since: new Date(found.since).toISOString(), evaluations: found.evaluations, failed: found.failed, failRate: found.failRate },
      evaluations: found.recent.map((e) => ({
        id: e.id,
        stage: e.stage,
        model: e.model,
        requestId: e.requestId,
        passed: e.passed,
        outcome: e.outcome,
        categories: e.categories,
        maskedText: e.maskedText,
        latencyMs: Math.round(e.latencyMs * 1000) / 1000,
        createdAt: new Date(e.createdAt).toISOString(),
      })),
    };
  });
}

/** POST /guardrails/evaluate (client API, interface 4.9). */
export async function guardrailEvaluateRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { guardrailEvaluator, inference } = ctx.services;
  requireApiToken(app, ctx.services.tokens);

  app.post<{ Body: Static<typeof EvaluateBody> }>('/api/client/v1/guardrails/evaluate', { schema: evaluateSchema, config: { audited: false } }, async (request, reply) => {
    // The judge meters its calls under service `guardrails` itself. Nothing admitted this request yet, so each judge
    // call is admitted on its own: a caller over its budget or rate limit gets its 429 before any model is called.
    const caller = callerOf(request, reply);
    const context = { scope: caller.scope, requestId: caller.requestId, stage: 'evaluate' as const, model: null, judge: inference.judge(caller, { admit: true }) };
    const { guardrail, result } = await guardrailEvaluator.evaluateByKey(context, request.body.guardrail_key, request.body.text);
    return {
      passed: result.passed,
      guardrail_key: guardrail.key,
      guardrail_name: guardrail.name,
      action: guardrail.action,
      findings: result.findings,
      message: result.message,
      ...(result.redactedText !== undefined ? { redacted_text: result.redactedText } : {}),
    };
  });
}
