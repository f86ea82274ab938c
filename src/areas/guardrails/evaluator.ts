import type { Logger } from 'pino';
import { ERRORS } from '../../http/errors.js';
import type { ProjectScope } from '../../http/principal.js';
import { BufferedWriter } from '../../platform/buffered-writer.js';
import { timeOrderedId } from '../../platform/ids.js';
import type { ModelService } from '../models/service.js';
import { EvaluationError, maskedPreview, runGuardrail, runPiiTexts, type Judge } from './engines.js';
import { usesJudge, type GuardrailService } from './service.js';
import type { EvaluationRecord, GuardrailRecord, GuardrailStore } from './store.js';
import type { Finding } from './types.js';

/** Interface 2.6: the outcome of one guardrail over a text. */
export interface EvaluationResult {
  passed: boolean;
  findings: Finding[];
  /** Why the text did not pass, for the client; null when it passed. */
  message: string | null;
  /** PII guardrails that redact: the text with every finding replaced by `[REDACTED:<category>]`. */
  redactedText?: string;
}

/** Where an evaluation happens, for its record, and the judge its model-based checks call. */
export interface EvaluationContext {
  scope: ProjectScope;
  requestId: string;
  stage: EvaluationRecord['stage'];
  model: string | null;
  judge: Judge;
}

/** A text of a model call. `trusted` texts (system and developer messages) are the application's: prompt shields skip them. */
export interface GuardedText {
  text: string;
  trusted: boolean;
}

/** The texts a call may go on with (redacted where a guardrail redacts), and which guardrail changed them. */
export interface Enforced {
  texts: string[];
  redactedBy: { guardrailKey: string; findings: Finding[] } | null;
}

/** Recorded text: at most this much of the start, PII redacted. */
const MASKED_PREVIEW_CHARS = 300;

/**
 * Runs guardrails: one on demand (POST /guardrails/evaluate) or a model's, on each call (issue 5 part 7), applying
 * failMode to judge failures. Every evaluation is recorded once, with masked text only.
 */
export class GuardrailEvaluator {
  private readonly records: BufferedWriter<EvaluationRecord>;

  constructor(
    private readonly guardrails: GuardrailService,
    private readonly models: ModelService,
    private readonly store: GuardrailStore,
    private readonly log: Logger,
  ) {
    this.records = new BufferedWriter({
      name: 'guardrail evaluations',
      write: (batch) => store.insertEvaluations(batch),
      describe: (record) => ({ evaluationId: record.id, requestId: record.requestId }),
      log,
    });
  }

  /** POST /guardrails/evaluate: one guardrail, one text. */
  async evaluateByKey(context: EvaluationContext, key: string, text: string): Promise<{ guardrail: GuardrailRecord; result: EvaluationResult }> {
    const guardrail = await this.guardrails.get(context.scope, key);
    const started = performance.now();
    const { result, redacted } = await this.run(context, guardrail, [text]);
    this.record(context, guardrail, text, result, null, performance.now() - started);
    return { guardrail, result: guardrail.action === 'redact' && redacted ? { ...result, redactedText: redacted[0] } : result };
  }

  /** One guardrail over texts: PII reads each (to redact each), the others read them joined. */
  private async run(context: EvaluationContext, guardrail: GuardrailRecord, texts: string[]): Promise<{ result: EvaluationResult; redacted?: string[] }> {
    let findings: Finding[];
    let redacted: string[] | undefined;
    try {
      if (guardrail.type === 'pii') ({ findings, redacted } = runPiiTexts(guardrail, texts));
      else {
        const judgeCapabilities = guardrail.modelKey ? ((await this.models.find(context.scope, guardrail.modelKey))?.record.capabilities ?? []) : [];
        ({ findings } = await runGuardrail(guardrail, texts.join('\n\n'), context.judge, judgeCapabilities));
      }
    } catch (err) {
      if (!(err instanceof EvaluationError)) throw err;
      this.log.warn({ guardrail: guardrail.key, requestId: context.requestId, reason: err.message }, 'guardrail judge failed; failMode decides');
      findings = [{ category: 'evaluation_error', message: err.message, block: guardrail.failMode === 'closed' }];
    }
    const passed = !findings.some((f) => f.block);
    const blocking = [...new Set(findings.filter((f) => f.block).map((f) => f.category))];
    return { result: { passed, findings, message: passed ? null : `Blocked by guardrail "${guardrail.name}": ${blocking.join(', ')}` }, redacted };
  }

  /**
   * A model's guardrails over a call's texts, in order. block throws the guardrail_block error; redact returns the
   * texts redacted (later guardrails see them so); flag lets them through. A stream is checked several times on its
   * way (`final` false): those checks are recorded only when they block, the final one always, so each request
   * leaves one record per guardrail and stage.
   */
  async enforce(context: EvaluationContext & { stage: 'input' | 'output' }, guardrails: GuardrailRecord[], texts: GuardedText[], final = true): Promise<Enforced> {
    const current = texts.map((t) => t.text);
    let redactedBy: Enforced['redactedBy'] = null;
    for (const guardrail of guardrails) {
      const read = texts.flatMap((t, i) => (guardrail.type === 'prompt_shield' && t.trusted ? [] : [i]));
      if (read.length === 0) continue;
      const readTexts = read.map((i) => current[i]!);
      const started = performance.now();
      const { result, redacted } = await this.run(context, guardrail, readTexts);
      const outcome = result.passed ? null : guardrail.action === 'block' ? 'blocked' : guardrail.action === 'redact' ? 'redacted' : 'flagged';
      if (final || outcome === 'blocked') this.record(context, guardrail, readTexts.join('\n\n'), result, outcome, performance.now() - started);
      if (result.passed) continue;
      // A judge's reasons may quote the answer it stopped: the client gets the categories only.
      const findings = context.stage === 'output' && usesJudge(guardrail) ? result.findings.map((f) => ({ ...f, message: `The output failed the guardrail's check (${f.category})` })) : result.findings;
      if (guardrail.action === 'block') throw ERRORS.guardrailBlock(guardrail.key, context.stage, findings);
      if (guardrail.action === 'redact' && redacted) {
        read.forEach((i, k) => (current[i] = redacted[k]!));
        redactedBy = { guardrailKey: guardrail.key, findings };
      }
    }
    return { texts: current, redactedBy };
  }

  private record(context: EvaluationContext, guardrail: GuardrailRecord, text: string, result: EvaluationResult, outcome: EvaluationRecord['outcome'], latencyMs: number): void {
    const now = Date.now();
    this.records.push({
      id: timeOrderedId('gev', now),
      ...context.scope,
      guardrailKey: guardrail.key,
      guardrailType: guardrail.type,
      stage: context.stage,
      model: context.model,
      requestId: context.requestId,
      passed: result.passed,
      action: guardrail.action,
      outcome,
      categories: [...new Set(result.findings.map((f) => f.category))],
      maskedText: maskedPreview(text, MASKED_PREVIEW_CHARS),
      latencyMs,
      createdAt: now,
    });
  }

  /** A guardrail's recent evaluations and its fail rate over the last 24 hours (what is buffered included). */
  async evaluations(scope: ProjectScope, key: string, limit: number): Promise<{ since: number; evaluations: number; failed: number; failRate: number; recent: EvaluationRecord[] }> {
    // Evaluations are kept by key: a guardrail deleted and created again under its key does not inherit the old ones.
    const { createdAt } = await this.guardrails.get(scope, key);
    await this.records.flush();
    const since = Math.max(Date.now() - 86_400_000, createdAt);
    const [recent, counts] = await Promise.all([this.store.recentEvaluations(scope, key, limit, createdAt), this.store.counts(scope, key, since)]);
    return { since, ...counts, failRate: counts.evaluations === 0 ? 0 : counts.failed / counts.evaluations, recent };
  }

  flush(): Promise<void> {
    return this.records.flush();
  }

  close(): Promise<void> {
    return this.records.close();
  }
}
