import type { FastifyInstance } from 'fastify';

/** Interface 9.1: the machine-readable description, generated from the route schemas; no token needed. */
export async function openapiRoutes(app: FastifyInstance): Promise<void> {
  app.get('/api/client/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
