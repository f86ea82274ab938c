import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Context } from '../../context.js';
import { ERRORS } from '../../http/errors.js';
import { requireSession, sessionCredential, userOf } from '../../http/guards.js';
import { userView } from '../users/service.js';
import { SESSION_COOKIE } from './service.js';
import { loginSchema, logoutSchema, meSchema, type LoginBody } from './schemas.js';

export async function authRoutes(app: FastifyInstance, { ctx }: { ctx: Context }): Promise<void> {
  const { auth, users } = ctx.services;

  app.post<{ Body: Static<typeof LoginBody> }>('/api/auth/login', { schema: loginSchema }, async (request, reply) => {
    const result = await auth.login(request.body.email, request.body.password, request.ip);
    if (!result.ok) {
      request.auditActor = result.actor;
      throw result.error;
    }
    request.auditActor = { tenantId: result.user.tenantId, userId: result.user.id };
    void reply.setCookie(SESSION_COOKIE, result.token, {
      httpOnly: true,
      sameSite: 'strict',
      path: '/api',
      secure: request.protocol === 'https',
      expires: new Date(result.expiresAt),
    });
    return { token: result.token, expiresAt: new Date(result.expiresAt).toISOString(), user: userView(result.user) };
  });

  // Ends every session of the user (sessions are stateless JWTs; the user's session version revokes them).
  app.post('/api/auth/logout', { schema: logoutSchema }, async (request, reply) => {
    const jwt = sessionCredential(request);
    const principal = jwt ? await auth.authenticate(jwt, undefined) : null;
    if (principal) {
      await users.endSessions(principal.tenantId, principal.userId);
      request.auditActor = { tenantId: principal.tenantId, userId: principal.userId };
    }
    void reply.clearCookie(SESSION_COOKIE, { path: '/api' });
    return { success: true };
  });

  await app.register(async (scope) => {
    requireSession(scope, auth);
    scope.get('/api/auth/me', { schema: meSchema }, async (request) => {
      const principal = userOf(request);
      const user = await users.findById(principal.tenantId, principal.userId);
      if (!user) throw ERRORS.notAuthenticated();
      return { user: userView(user), tenantId: principal.tenantId, projectId: principal.projectId };
    });
  });
}
