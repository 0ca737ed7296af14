/**
 * Errors with stable string codes (STYLE.md; every code and its kind is in
 * `codes.ts`). Per-record problems are not errors: they are dead-letter
 * decisions returned as values. These classes are for what a processor or
 * the runtime cannot decide about a record, and for what stops a process:
 * bad configuration, broken invariants.
 */
import { ERROR_CODES, type ErrorCode, type ErrorKind } from './codes.js';

export { DEAD_LETTER_REASONS, ERROR_CODES, isErrorCode, kindOfCode } from './codes.js';
export type { CodeOfKind, DeadLetterCode, ErrorCode, ErrorKind } from './codes.js';

export class RolloutStreamError extends Error {
  readonly code: ErrorCode;
  /** Worth retrying as it is (a registry that timed out); a transient code is retriable whatever this says. */
  readonly retriable: boolean;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; retriable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? ERROR_CODES[code] === 'transient';
  }

  /** What the runtime does about this error (codes.ts). */
  get kind(): ErrorKind {
    return this.retriable ? 'transient' : ERROR_CODES[this.code];
  }
}

/**
 * Whether a processor's exception is a verdict on its record: one of our
 * coded errors of kind poison (a dead-letter reason, a PackError's code, a
 * publisher's validation failure), which says the same about the record
 * every time. Anything else (TypeError, RangeError, ReferenceError, any Error
 * without our code, a thrown non-Error, `processing_error` itself, a coded
 * error of another kind) is a bug or a failure of something else, not data.
 */
export function isVerdict(e: unknown): boolean {
  return e instanceof RolloutStreamError && e.kind === 'poison' && e.code !== 'processing_error';
}

/** A configuration that cannot run. `path` names the offending key, e.g. `postprocess.reward_penalties.token_ids.unwanted`. */
export class ConfigError extends RolloutStreamError {
  readonly path: string;

  constructor(path: string, message: string, options: { cause?: unknown } = {}) {
    super('config_invalid', `${path}: ${message}`, options);
    this.path = path;
  }
}

/** Maps an error of one Kafka client library to our code (null: not one of its errors). */
export type ForeignErrorMapper = (e: unknown) => ErrorCode | null;

const foreignMappers: ForeignErrorMapper[] = [];

/**
 * Each client adapter (streams/kafka/<client>/errors.ts) registers how its
 * library's errors map to our codes, so the runtime's error policy can
 * classify an error that escaped uncoded without knowing any library.
 */
export function registerErrorMapper(mapper: ForeignErrorMapper): void {
  if (!foreignMappers.includes(mapper)) foreignMappers.push(mapper);
}

/** The code the first registered adapter gives `e`; null when none knows it. */
export function foreignErrorCode(e: unknown): ErrorCode | null {
  for (const m of foreignMappers) {
    const code = m(e);
    if (code !== null) return code;
  }
  return null;
}
