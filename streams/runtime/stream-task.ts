/**
 * One assigned input partition (Kafka Streams' StreamTask): its chain of
 * processors (one stage, or the fused accumulate → postprocess → pack), its
 * transactional sink (id = <group>.<topic>.<partition>: whoever owns the
 * partition next fences this one with its `init`), and a mutex that
 * serializes batches and timer ticks. It runs a batch or a tick through the
 * chain and writes everything in one transaction: each node's outputs, the
 * next node's inputs pinned to this partition (fused), every group's offset.
 *
 * A task is disposable: after any failure inside a transaction it is closed
 * and a fresh one is built (fence, restore, re-read from the committed
 * offset) — the one path for "someone else may own this partition now".
 */
import type { InputRecord, PartitionProcessor, Stage, StageOutput } from '../api/stage.js';
import { nextOffset, type TransactionalSink } from '../kafka/types.js';
import { crashPoint } from './crash-points.js';
import { ProcessingFailure } from './error-policy.js';
import type { NodeContext, RecordPolicy } from './record-policy.js';
import type { TransactionWriter } from './transaction-writer.js';

/** One node of a chain: a stage and the consumer group its offsets are committed under. */
export interface ChainNode {
  stage: Stage;
  groupId: string;
}

export class StreamTask {
  /** Offset check done after fencing. */
  positionChecked = false;
  closed = false;
  private lock: Promise<unknown> = Promise.resolve();

  constructor(
    readonly partition: number,
    readonly sink: TransactionalSink,
    /** The chain's nodes, first the runner's own stage. */
    readonly chain: readonly ChainNode[],
    /** One processor per node, same order. */
    readonly processors: readonly PartitionProcessor[],
    private readonly writer: TransactionWriter,
    private readonly policy: RecordPolicy,
  ) {}

  get processor(): PartitionProcessor {
    return this.processors[0]!;
  }

  /** Fences every earlier owner of the partition (and completes or aborts its open transaction). */
  async open(): Promise<void> {
    await this.sink.init();
  }

  /** Runs `fn` after every earlier call on this task has finished. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.lock.then(fn, fn);
    this.lock = next.catch(() => undefined);
    return next;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sink.close().catch(() => undefined);
  }

  /** Processes `records` of the input partition and commits them with the resume offset of the last one (`next`: past its last chunk). */
  async processStep(records: InputRecord[], ctx: NodeContext): Promise<void> {
    const head = this.chain[0]!;
    const out = await this.policy.runNode(head.stage, this.processor, records, false, ctx);
    await this.write(0, out, records, nextOffset(records[records.length - 1]!), ctx);
  }

  /**
   * Timer ticks of every node of the chain, in order; each tick's output
   * flows down the rest of the chain in its own transaction, as a batch's
   * does. Says whether anything was written.
   */
  async tick(nowMs: number, ctx: NodeContext): Promise<boolean> {
    let wrote = false;
    for (let i = 0; i < this.processors.length; i++) {
      const processor = this.processors[i]!;
      if (!processor.tick) continue;
      let out: StageOutput;
      try {
        out = await processor.tick(nowMs);
      } catch (e) {
        throw new ProcessingFailure(this.chain[i]!.stage.name, [], e);
      }
      if (out.messages.length + out.deadLetters.length + out.changelog.length === 0) continue;
      await this.write(i, out, [], null, ctx);
      wrote = true;
    }
    return wrote;
  }

  /** Whether any node of the chain has time-driven work. */
  get ticks(): boolean {
    return this.processors.some((p) => p.tick !== undefined);
  }

  /**
   * One transaction: node `from`'s output, then (fused) each later node on
   * the records just written to its input topic, with their real offsets,
   * and that node's group offset past them. `nextOffset` is the input offset
   * of node `from` to commit (null for a tick).
   */
  private async write(from: number, out: StageOutput, sources: InputRecord[], nextOffset: string | null, ctx: NodeContext): Promise<void> {
    const first = this.chain[from]!;
    const tx = await this.writer.begin(this.sink, this.partition);
    try {
      if (nextOffset !== null) tx.addOffset(first.stage.name, first.groupId, first.stage.inputTopic, nextOffset);
      let step = { stage: first.stage, out, sources };
      for (let i = from + 1; ; i++) {
        const next = this.chain[i];
        const written = await tx.send(step, next?.stage.inputTopic);
        tx.phase(step.stage.name, 'send');
        crashPoint('tx.after-send');
        if (!next || written.length === 0) break;
        tx.addOffset(next.stage.name, next.groupId, next.stage.inputTopic, (BigInt(written[written.length - 1]!.offset) + 1n).toString());
        tx.countInputs(next.stage.name, written.length);
        step = { stage: next.stage, out: await this.policy.runNode(next.stage, this.processors[i]!, written, true, ctx), sources: written };
        tx.phase(next.stage.name, 'process');
        crashPoint('tx.after-downstream');
      }
      await tx.commit();
    } catch (e) {
      await tx.abort();
      throw e;
    } finally {
      tx.settle();
    }
  }

  /** Open groups and similar gauges of every node of the chain. */
  gauges(): Record<string, number> {
    const sum: Record<string, number> = {};
    for (const p of this.processors) combineGauges(sum, p.gauges?.() ?? {});
    return sum;
  }
}

/** Sums gauges over tasks, except `*_min` / `*_max` ones, which take the least / greatest. */
export function combineGauges(sum: Record<string, number>, g: Record<string, number>): void {
  for (const [k, v] of Object.entries(g)) {
    const had = sum[k];
    if (had === undefined) sum[k] = v;
    else if (k.endsWith('_min')) sum[k] = Math.min(had, v);
    else if (k.endsWith('_max')) sum[k] = Math.max(had, v);
    else sum[k] = had + v;
  }
}

