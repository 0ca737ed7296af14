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
import { emptyOutput, type InputRecord, type PartitionProcessor, type Stage, type StageOutput } from '../api/stage.js';
import { nextOffset, type TransactionalSink } from '../kafka/types.js';
import { crashPoint } from './crash-points.js';
import { ProcessingFailure } from './error-policy.js';
import type { NodeContext, RecordPolicy } from './record-policy.js';
import type { TransactionWriter } from './transaction-writer.js';
import { boundsOf, readForeign, startOf, type ForeignReader, type Handoff } from './fused-handoff.js';

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
  /** Fused: per downstream node (by chain index), what of its input partition is accounted for (fused-handoff.ts); absent: not read yet. */
  private readonly handoffs = new Map<number, Handoff>();

  constructor(
    readonly partition: number,
    readonly sink: TransactionalSink,
    /** The chain's nodes, first the runner's own stage. */
    readonly chain: readonly ChainNode[],
    /** One processor per node, same order. */
    readonly processors: readonly PartitionProcessor[],
    private readonly writer: TransactionWriter,
    private readonly policy: RecordPolicy,
    /** Fused: reads what others wrote into the downstream nodes' input partitions (absent: the chain trusts its own hand-off alone). */
    private readonly foreign?: ForeignReader,
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
    // Records a fused process handed on were processed in the transaction that wrote them.
    const fresh = records.filter((r) => !r.handedOff);
    const out = fresh.length > 0 ? await this.policy.runNode(head.stage, this.processor, fresh, false, ctx) : emptyOutput();
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
    const handoffs: Array<[number, Handoff]> = [];
    try {
      if (nextOffset !== null) tx.addOffset(first.stage.name, first.groupId, first.stage.inputTopic, nextOffset);
      let step = { stage: first.stage, out, sources };
      for (let i = from + 1; ; i++) {
        const next = this.chain[i];
        const written = await tx.send(step, next?.stage.inputTopic);
        tx.phase(step.stage.name, 'send');
        crashPoint('tx.after-send');
        if (!next || written.length === 0) break;
        // Past the last write (its last chunk when it went as a chunk set).
        const lastWrite = written[written.length - 1]!;
        const past = lastWrite.next !== undefined ? BigInt(lastWrite.next) : BigInt(lastWrite.offset) + 1n;
        const h = this.handoffs.get(i);
        if (!this.foreign || (h && !h.dirty && BigInt(written[0]!.offset) === h.expectedEnd)) {
          // Nothing foreign since what is accounted for: the group's offset moves past these writes (the commit marker follows them).
          tx.addOffset(next.stage.name, next.groupId, next.stage.inputTopic, past.toString());
          handoffs.push([i, { pos: past, expectedEnd: past + 1n, dirty: false }]);
        } else if (h) {
          // Someone else wrote there: the offset stays, and the task reads that range itself (catchUp).
          handoffs.push([i, { ...h, dirty: true }]);
        }
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
    for (const [i, h] of handoffs) this.handoffs.set(i, h);
  }

  /** Whether a downstream node's input partition may hold records others wrote that this task has not read yet. */
  get foreignPending(): boolean {
    if (!this.foreign) return false;
    for (let i = 1; i < this.chain.length; i++) {
      const h = this.handoffs.get(i);
      if (!h || h.dirty) return true;
    }
    return false;
  }

  /** End offsets of the downstream topics (polled while idle): one past what this task expects means someone else wrote there. */
  noteEnds(ends: Map<string, Map<number, string>>): void {
    for (const [i, h] of this.handoffs) {
      const high = ends.get(this.chain[i]!.stage.inputTopic)?.get(this.partition);
      if (high !== undefined && BigInt(high) > h.expectedEnd) h.dirty = true;
    }
  }

  /**
   * Fused: processes the records others wrote into the downstream nodes'
   * input partitions since what this task has accounted for (all of them at
   * a task's first call: from the groups' committed offsets), through the
   * rest of the chain in its own transactions, skipping records the chain
   * handed off itself. Returns how many records it processed, per topic.
   */
  async catchUp(ctx: NodeContext): Promise<Map<string, number>> {
    const done = new Map<string, number>();
    const f = this.foreign;
    if (!f) return done;
    for (let i = 1; i < this.chain.length; i++) {
      const h = this.handoffs.get(i);
      if (h && !h.dirty) continue;
      const node = this.chain[i]!;
      const topic = node.stage.inputTopic;
      let pos = h ? h.pos : await startOf(f, node.groupId, topic, this.partition);
      let committed = pos;
      for (;;) {
        const { low, high } = await boundsOf(f, topic, this.partition);
        if (pos < low) pos = low;
        if (pos >= high) break;
        const { records, next } = await readForeign(f, topic, this.partition, pos, high);
        if (records.length > 0) {
          const out = await this.policy.runNode(node.stage, this.processors[i]!, records, true, ctx);
          out.counters = { ...out.counters, foreign_records: (out.counters?.foreign_records ?? 0) + records.length };
          await this.write(i, out, records, next.toString(), ctx);
          committed = next;
          done.set(topic, (done.get(topic) ?? 0) + records.length);
        }
        pos = next;
      }
      // Only marked records (or markers) since the committed offset: move it past them (its group shows no lag).
      if (committed !== pos) await this.write(i, emptyOutput(), [], pos.toString(), ctx);
      this.handoffs.set(i, { pos, expectedEnd: pos, dirty: false });
    }
    return done;
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

