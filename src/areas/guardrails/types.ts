/** One thing a guardrail found (interface 2.6 `findings` items). */
export interface Finding {
  category: string;
  message: string;
  /** Whether this finding makes the guardrail fail (with action block, the request is refused). */
  block: boolean;
}

/** A span of the normalised text a detector matched, for redaction. */
export interface Span {
  category: string;
  start: number;
  end: number;
}
