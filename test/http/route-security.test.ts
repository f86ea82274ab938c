import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, createTestApp, type TestApp } from '../helpers/app.js';
import { CLIENT_ROUTES, clientSecurityCases, DASHBOARD_ROUTES, dashboardSecurityCases, securedOperations } from '../helpers/security.js';

describe.each(BACKENDS)('route security on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, noWorkers: true });
  });
  afterAll(async () => t.close());
  const getT = () => t;

  it('the route inventory lists every secured route the app registers', () => {
    const registered = securedOperations(t);
    expect(CLIENT_ROUTES.map((r) => r.operation).sort()).toEqual(registered.client);
    expect(DASHBOARD_ROUTES.map((r) => r.operation).sort()).toEqual(registered.dashboard);
    expect(registered.client.length).toBeGreaterThanOrEqual(2);
    expect(registered.dashboard.length).toBeGreaterThanOrEqual(9);
  });

  describe.each(CLIENT_ROUTES)('client route $operation', (route) => {
    clientSecurityCases(getT, route);
  });

  describe.each(DASHBOARD_ROUTES)('dashboard route $operation', (route) => {
    dashboardSecurityCases(getT, route);
  });
});
