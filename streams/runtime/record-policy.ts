/**
 * The per-record side of the error policy (runtime.poison, error-policy.ts)
 * for one runner: failures counted per record (they outlive rebuilt tasks),
 * partitions being isolated (replayed one record per transaction after a
 * processor threw on a batch), and running a chain node's processor so that
 * a record at its limit gets the policy instead of another call.
 */
import { emptyOutput, type InputRecord, type PartitionProcessor, type Stage, type StageOutput } from '../api/stage.js';
import { AttemptBook, describeError, isVerdict, processingErrorLetter, ProcessingFailure, recordId, type PoisonPolicy } from './error-policy.js';
import type { Logger } from './logger.js';

/** `isolating` mark of a partition whose timer tick failed downstream: no input range, the next tick and batch go record by record. */
export const TICK_ISOLATION = -1n;

/** How a chain node runs in one transaction: record by record (isolating), and the records dead-lettered in it. */
export interface NodeContext {
  isolate: boolean;
  settled: string[];
}

export class RecordPolicy {
  readonly attempts: AttemptBook;
  /** Partition → last offset of a batch that failed in a processor: replayed one record per transaction up to there. */
  readonly isolating = new Map<number, bigint>();

  constructor(
    policy: PoisonPolicy,
    /** The chain's first stage: record ids are scoped by it. */
    private readonly head: string,
    private readonly chainName: string,
    private readonly log: Logger,
  ) {
    this.attempts = new AttemptBook(policy);
  }

  get policy(): PoisonPolicy {
    return this.attempts.policy;
  }

  context(partition: number): NodeContext {
    return { isolate: this.isolating.has(partition), settled: [] };
  }

  /** The steps a batch runs in: one, or one per record while the partition is isolated up to past this batch. */
  steps(partition: number, records: InputRecord[]): InputRecord[][] {
    const isolateTo = this.isolating.get(partition);
    return isolateTo !== undefined && BigInt(records[0]!.offset) <= isolateTo ? records.map((r) => [r]) : [records];
  }

  /** A step committed: isolation ends once past the failing range, and the dead-lettered records are forgotten. */
  committed(partition: number, lastOffset: string | null, ctx: NodeContext): void {
    const isolateTo = this.isolating.get(partition);
    if (isolateTo !== undefined && lastOffset !== null && BigInt(lastOffset) >= isolateTo) this.isolating.delete(partition);
    if (lastOffset === null && isolateTo === TICK_ISOLATION) this.isolating.delete(partition);
    for (const id of ctx.settled) this.attempts.clear(id);
  }

  /** The partition went to another instance: its counts are the next owner's to keep. */
  forget(partition: number): void {
    this.isolating.delete(partition);
    this.attempts.clearPartition(this.head, partition);
  }

  /**
   * Runs one chain node's processor on `records`. Normally one call for all
   * of them; record by record while the partition is being isolated or when
   * one of the records failed before, so that a record whose failures reached
   * `runtime.poison.attempts` gets the policy instead of another call
   * (dead-letter: a `processing_error` dead letter in this transaction).
   * A processor's exception comes out as a ProcessingFailure naming the
   * record(s) of the failing call.
   */
  async runNode(node: Stage, processor: PartitionProcessor, records: InputRecord[], byKey: boolean, ctx: NodeContext): Promise<StageOutput> {
    const now = Date.now();
    const idOf = (r: InputRecord) => recordId(this.head, node.name, r, byKey);
    const perRecord = ctx.isolate || (this.attempts.size > 0 && records.some((r) => this.attempts.failures(idOf(r)) > 0));
    if (!perRecord || records.length === 0) {
      try {
        return await processor.process(records, now);
      } catch (e) {
        throw new ProcessingFailure(node.name, records, e);
      }
    }
    const out = emptyOutput();
    for (const r of records) {
      const id = idOf(r);
      const verdict = this.attempts.verdict(id);
      if (verdict === 'dead-letter') {
        out.deadLetters.push(processingErrorLetter(node.name, r, this.attempts.lastError(id), this.attempts.failures(id), now));
        ctx.settled.push(id);
        const also = await processor.poisoned?.(r, now).catch((e: unknown) => {
          this.log.warn(`${this.chainName}: ${node.name}: reporting a dead-lettered record failed: ${describeError(e)}`);
          return null;
        });
        if (also) mergeOutput(out, also);
        continue;
      }
      if (verdict === 'stop') throw new ProcessingFailure(node.name, [r], this.attempts.lastError(id));
      let o: StageOutput;
      try {
        o = await processor.process([r], now);
      } catch (e) {
        throw new ProcessingFailure(node.name, [r], e);
      }
      mergeOutput(out, o);
    }
    return out;
  }

  /**
   * A processor threw on `f.records` of a batch ending at `lastOfBatch`
   * (TICK_ISOLATION for a tick). The partition is isolated up to there; with
   * one record (or a tick) its failures are counted. Says what to do next:
   * `stop` the partition (a bug under policy stop, or a tick at its limit),
   * or rebuild after `waitMs` (none for a verdict: its dead letter is next).
   */
  failed(partition: number, f: ProcessingFailure, lastOfBatch: bigint): { action: 'stop'; reason: string } | { action: 'retry'; waitMs: number } {
    const isolateTo = this.isolating.get(partition);
    if (isolateTo === undefined || lastOfBatch > isolateTo) this.isolating.set(partition, lastOfBatch);
    const policy = this.attempts.policy;
    const r = f.records.length === 1 ? f.records[0]! : null;
    if (!r && f.records.length > 0) {
      this.log.warn(
        `${this.chainName}: ${f.stage} failed on a batch of ${f.records.length} records on partition ${partition}: ${describeError(f.cause)}; ` +
          `replaying them one per transaction to find the failing one`,
      );
      return { action: 'retry', waitMs: policy.backoff_ms };
    }
    const id = r ? recordId(this.head, f.stage, r, f.stage !== this.head) : `${this.head}/${partition}/${f.stage}/tick`;
    const { failures, exhausted, backoffMs } = this.attempts.fail(id, f.cause);
    const where = r ? `${r.topic} partition ${r.partition} offset ${r.offset}${r.key ? ` (key ${r.key.toString('utf8')})` : ''}` : 'its timer tick';
    this.log.warn(`${this.chainName}: ${f.stage} failed on ${where} (attempt ${failures} of ${policy.attempts}): ${describeError(f.cause)}`);
    // A verdict is a dead letter under either policy; a bug stops the partition under `stop`. A tick has no record to dead-letter: it stops under either.
    const verdict = isVerdict(f.cause);
    if (exhausted && ((policy.policy === 'stop' && !verdict) || !r)) {
      this.isolating.delete(partition);
      return { action: 'stop', reason: `${f.stage} failed ${failures} time(s) on ${where}: ${describeError(f.cause)}` };
    }
    if (exhausted) {
      this.log.warn(
        verdict
          ? `${this.chainName}: ${f.stage}: dead-lettering ${where}: the processor's verdict on it (not retried)`
          : `${this.chainName}: ${f.stage}: dead-lettering ${where} as processing_error (runtime.poison.policy: dead-letter)`,
      );
    }
    return { action: 'retry', waitMs: backoffMs };
  }
}

/** Appends `o` to `out` (outputs of one node's calls record by record). */
export function mergeOutput(out: StageOutput, o: StageOutput): void {
  out.messages.push(...o.messages);
  out.deadLetters.push(...o.deadLetters);
  out.changelog.push(...o.changelog);
  for (const [k, v] of Object.entries(o.counters ?? {})) (out.counters ??= {})[k] = (out.counters[k] ?? 0) + v;
}
