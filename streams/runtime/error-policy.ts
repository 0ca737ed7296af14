/**
 * The one error policy of the stage runtime (docs/design-streams-redesign.md,
 * "One error policy"): what kind an error is (errors/codes.ts), how long to
 * wait before the next try, and the per-record policy for a record whose
 * processing keeps throwing (`runtime.poison`).
 *
 * The per-record bookkeeping lives here, in the runner's lifetime, not the
 * task's: a task is rebuilt after every failure, and the attempts must
 * outlive that (a process restart starts counting again).
 */
import { DEAD_LETTER_REASONS, ERROR_CODES, foreignErrorCode, isVerdict, RolloutStreamError, type DeadLetterCode, type ErrorCode, type ErrorKind } from '../../errors/index.js';

export { isVerdict } from '../../errors/index.js';
import type { DeadLetterRecord } from '../api/dead-letter-record.js';
import { sourceOf, type InputRecord } from '../api/stage.js';

export interface Classified {
  kind: ErrorKind;
  code: ErrorCode;
}

export interface PoisonPolicy {
  /**
   * For a bug (an exception that is no verdict, isVerdict): `stop` pauses the
   * partition after `attempts`; `dead-letter` writes a `processing_error`
   * dead letter and goes on. A verdict is dead-lettered at its first failure
   * under either.
   */
  policy: 'dead-letter' | 'stop';
  /** Failures of one record before the policy applies (>= 1). */
  attempts: number;
  /** Wait before the first retry of a failing record; doubles with each further failure (to at most 60 s). */
  backoff_ms: number;
}

/**
 * An exception thrown by a stage's processor (not by Kafka), with the input
 * records of the failing call. With exactly one record the failing record is
 * known; with more, the runner isolates it by replaying one at a time.
 */
export class ProcessingFailure extends Error {
  constructor(
    readonly stage: string,
    readonly records: InputRecord[],
    override readonly cause: unknown,
  ) {
    super(`${stage}: ${describeError(cause)}`, { cause });
    this.name = 'ProcessingFailure';
  }
}

/**
 * The kind and code of an error. Our own errors carry their code; a client
 * library's errors are mapped by its adapter (registerErrorMapper); an exception a processor threw that is
 * none of these is `processing_error` (poison: the per-record policy); any
 * other unrecognised error (a transaction that failed for a reason nobody
 * coded) is `transaction_outcome_unknown`: abort, rebuild, re-read.
 */
export function classify(e: unknown): Classified {
  if (e instanceof ProcessingFailure) {
    const inner = e.cause instanceof ProcessingFailure ? classify(e.cause) : codedKind(e.cause);
    // A coded poison error escaping a processor (e.g. a PackError nobody caught) is still one record's problem.
    return inner && inner.kind !== 'poison' ? inner : { kind: 'poison', code: 'processing_error' };
  }
  return codedKind(e) ?? { kind: 'task_migrated', code: 'transaction_outcome_unknown' };
}

function codedKind(e: unknown): Classified | null {
  if (e instanceof RolloutStreamError) return { kind: e.kind, code: e.code };
  const k = foreignErrorCode(e);
  return k ? { kind: ERROR_CODES[k], code: k } : null;
}

/** Transient errors and rebuilds wait 1 s, doubling to at most 15 s (`failures` counts from 1). */
export function retryDelayMs(failures: number, baseMs = 1_000, maxMs = 15_000): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));
}

/** `code: message (at <first stack frame>)`, one line, for logs and dead letters. */
export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const code = e instanceof RolloutStreamError ? e.code : e.name;
  const frame = e.stack?.split('\n').find((l) => /^\s+at /.test(l))?.trim();
  return `${code}: ${e.message}${frame ? ` (${frame})` : ''}`;
}

/** The doubling backoff of a failing record stops growing here (unless backoff_ms itself is larger). */
const MAX_BACKOFF_MS = 60_000;

interface Attempt {
  failures: number;
  error: unknown;
}

/**
 * Failures per record, keyed by `recordId`. `fail` counts one and says what
 * to do next; `verdict` tells the replay whether to process a record again
 * or apply the policy to it.
 */
export class AttemptBook {
  private readonly attempts = new Map<string, Attempt>();

  constructor(readonly policy: PoisonPolicy) {}

  get size(): number {
    return this.attempts.size;
  }

  /** Counts a failure of `id`; `exhausted`: the policy applies now (at once for a verdict: another try would say the same). */
  fail(id: string, error: unknown): { failures: number; exhausted: boolean; backoffMs: number } {
    const a = this.attempts.get(id) ?? { failures: 0, error };
    a.failures += 1;
    a.error = error;
    this.attempts.set(id, a);
    const exhausted = isVerdict(error) || a.failures >= this.policy.attempts;
    const backoffMs = Math.min(this.policy.backoff_ms * 2 ** Math.min(a.failures - 1, 30), Math.max(this.policy.backoff_ms, MAX_BACKOFF_MS));
    return { failures: a.failures, exhausted, backoffMs: exhausted ? 0 : backoffMs };
  }

  /** `process` (not failed often enough yet), or the policy to apply instead of processing it again (a verdict: its dead letter). */
  verdict(id: string): 'process' | 'dead-letter' | 'stop' {
    const a = this.attempts.get(id);
    if (a && isVerdict(a.error)) return 'dead-letter';
    if (!a || a.failures < this.policy.attempts) return 'process';
    return this.policy.policy;
  }

  failures(id: string): number {
    return this.attempts.get(id)?.failures ?? 0;
  }

  lastError(id: string): unknown {
    return this.attempts.get(id)?.error;
  }

  /** The record was dealt with (dead-lettered and committed past): forget it. */
  clear(id: string): void {
    this.attempts.delete(id);
  }

  /** Forgets every record of a partition (revoked: the next owner counts its own). */
  clearPartition(stage: string, partition: number): void {
    const prefix = `${stage}/${partition}/`;
    for (const id of this.attempts.keys()) if (id.startsWith(prefix)) this.attempts.delete(id);
  }
}

/**
 * A record's identity for the attempt count: its offset for the runner's own
 * input; its key for a record a fused upstream step wrote in the same
 * (aborted, so re-written elsewhere) transaction. `stage` is the chain head's
 * name so a revoked partition forgets every node's records.
 */
export function recordId(head: string, node: string, r: InputRecord, byKey: boolean): string {
  return `${head}/${r.partition}/${node}/${byKey ? `key:${r.key?.toString('utf8') ?? ''}` : `offset:${r.offset}`}`;
}

/**
 * The dead letter written for a record its stage failed on `failures` times:
 * reason `processing_error` (or the verdict's own code when it is a
 * dead-letter reason), the last error's code, message and first stack frame,
 * and the input record with its bytes.
 */
export function processingErrorLetter(stage: string, r: InputRecord, error: unknown, failures: number, nowMs: number): DeadLetterRecord {
  const key = r.key ? r.key.toString('utf8') : null;
  const own = isVerdict(error) ? (DEAD_LETTER_REASONS as readonly string[]).find((c) => c === (error as RolloutStreamError).code) : undefined;
  return {
    reason: (own as DeadLetterCode | undefined) ?? 'processing_error',
    message: `${stage} failed ${failures} time(s) on ${r.topic} partition ${r.partition} offset ${r.offset}: ${describeError(error)}`,
    stage,
    group_id: key,
    batch_id: null,
    row_indices: [],
    missing_row_indices: [],
    records: [sourceOf(r)],
    produced_at: nowMs,
  };
}
