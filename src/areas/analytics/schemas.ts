import { Type } from '@sinclair/typebox';
import { errorResponses, StringEnum } from '../../http/schemas.js';

const Bound = (which: string) =>
  Type.Optional(Type.String({ maxLength: 64, description: `${which} (ISO 8601 date or date-time, inclusive; a bare date as the upper bound covers its day; UTC unless an offset is given)` }));

export const OverviewQuery = Type.Object({ from: Bound('Start, default 30 days before `to`'), to: Bound('End, default now') }, { additionalProperties: false });

export const UsageQuery = Type.Object(
  {
    from: Bound('Start, default 30 days before `to`'),
    to: Bound('End, default now'),
    group_by: Type.Optional(StringEnum(['model', 'user', 'token', 'service'], { description: 'Default model' })),
    interval: Type.Optional(StringEnum(['hour', 'day', 'month'], { description: 'Time series step with group_by=model (default day); other groupings have a daily series' })),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Only this model key (group_by model, user and token)' })),
  },
  { additionalProperties: false },
);

const Metrics = {
  requests: Type.Integer(),
  errors: Type.Integer(),
  error_rate: Type.Number(),
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
  cost: Type.Number(),
  avg_latency_ms: Type.Number(),
  avg_upstream_latency_ms: Type.Number(),
};
const MetricsObject = Type.Object(Metrics);
const Nullable = (schema: ReturnType<typeof Type.String>) => Type.Union([schema, Type.Null()]);
const Point = Type.Object({ period: Type.String({ format: 'date-time' }), ...Metrics, models: Type.Optional(Type.Array(Type.Object({ model: Nullable(Type.String()), ...Metrics }))) });

const Envelope = {
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  currency: Type.String(),
};

export const overviewSchema = {
  operationId: 'analytics.overview',
  tags: ['client'],
  summary: 'Aggregate stats, recent tracing sessions (x-waygate-session-id) and a daily series',
  querystring: OverviewQuery,
  response: {
    200: Type.Object({
      object: Type.Literal('analytics.overview'),
      ...Envelope,
      stats: MetricsObject,
      recent_sessions: Type.Array(
        Type.Object({
          session_id: Type.String(),
          requests: Type.Integer(),
          errors: Type.Integer(),
          input_tokens: Type.Integer(),
          output_tokens: Type.Integer(),
          total_tokens: Type.Integer(),
          cost: Type.Number(),
          models: Type.Array(Type.String()),
          first_at: Type.String({ format: 'date-time' }),
          last_at: Type.String({ format: 'date-time' }),
        }),
      ),
      daily: Type.Array(Point),
    }),
    ...errorResponses(400, 401, 403),
  },
};

export const usageSchema = {
  operationId: 'analytics.usage',
  tags: ['client'],
  summary: 'Usage by model (with a time series), user, token or service',
  querystring: UsageQuery,
  response: {
    200: Type.Object({
      object: Type.Literal('analytics.usage'),
      group_by: Type.String(),
      interval: Nullable(Type.String()),
      ...Envelope,
      model: Nullable(Type.String()),
      totals: MetricsObject,
      by_model: Type.Optional(Type.Array(Type.Object({ model: Nullable(Type.String()), ...Metrics }))),
      breakdown: Type.Optional(
        Type.Array(
          Type.Object({
            service: Type.Optional(Nullable(Type.String())),
            token_id: Type.Optional(Nullable(Type.String())),
            token_name: Type.Optional(Nullable(Type.String())),
            user_id: Type.Optional(Nullable(Type.String())),
            email: Type.Optional(Nullable(Type.String())),
            ...Metrics,
          }),
        ),
      ),
      timeseries: Type.Array(Point),
    }),
    ...errorResponses(400, 401, 403),
  },
};
