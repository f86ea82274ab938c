import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../http/schemas.js';

/**
 * Counters are exact integers up to 2^53 (Redis scripts compute in doubles; costs are counted in nano-dollars), so
 * limits stay well inside that: 10^15 tokens, and 9 million USD a period.
 */
const MAX_TOKEN_LIMIT = 1e15;
const MAX_COST_USD = 9_000_000;
const MAX_RPM = 1e9;

export const BudgetSchema = Type.Object(
  {
    maxTokens: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TOKEN_LIMIT })),
    maxCostUsd: Type.Optional(Type.Number({ minimum: 1e-9, maximum: MAX_COST_USD, description: 'at least one nano-dollar, the unit budgets count in' })),
    period: StringEnum(['day', 'month', 'total']),
  },
  { additionalProperties: false, description: 'period plus maxTokens and/or maxCostUsd' },
);

export const RateLimitSchema = Type.Object(
  { rpm: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RPM })), tpm: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TOKEN_LIMIT })) },
  { additionalProperties: false, description: 'rpm and/or tpm' },
);
