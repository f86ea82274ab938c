import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../http/schemas.js';

export const BudgetSchema = Type.Object(
  {
    maxTokens: Type.Optional(Type.Integer({ minimum: 1 })),
    maxCostUsd: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
    period: StringEnum(['day', 'month', 'total']),
  },
  { additionalProperties: false, description: 'period plus maxTokens and/or maxCostUsd' },
);

export const RateLimitSchema = Type.Object(
  { rpm: Type.Optional(Type.Integer({ minimum: 1 })), tpm: Type.Optional(Type.Integer({ minimum: 1 })) },
  { additionalProperties: false, description: 'rpm and/or tpm' },
);
