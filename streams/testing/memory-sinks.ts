/**
 * The transactional producer of the in-memory cluster: the guarded state
 * machine of streams/kafka/transaction-state.ts over the cluster's
 * transactions and producer epochs. A call after a newer `init()` of the
 * same id throws `producer_fenced` (and the sink is `fenced`); a call of a
 * dead process never answers (memory-connection.ts).
 */
import { TransactionStateMachine, type TxState } from '../kafka/transaction-state.js';
import type { OutgoingRecord, PartitionOffset, RecordPosition, TransactionalSink } from '../kafka/types.js';
import type { MemoryCluster, Txn } from './memory-cluster.js';
import type { MemoryConnection } from './memory-connection.js';

export class MemoryTransactionalSink implements TransactionalSink {
  private readonly machine: TransactionStateMachine;
  private epoch = -1;
  private txn: Txn | null = null;

  constructor(
    private readonly cluster: MemoryCluster,
    readonly transactionalId: string,
    private readonly conn: MemoryConnection,
  ) {
    this.machine = new TransactionStateMachine(transactionalId);
  }

  get state(): TxState {
    return this.machine.state;
  }

  private fencedCheck(nextOnFence: TxState = 'fenced'): void {
    try {
      this.cluster.checkEpoch(this.transactionalId, this.epoch);
    } catch (e) {
      this.machine.to(nextOnFence);
      throw e;
    }
  }

  async init(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('init');
    this.machine.to('initializing');
    this.epoch = this.cluster.initProducer(this.transactionalId, this.conn.name);
    this.machine.to('ready');
  }

  async begin(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('begin');
    this.machine.to('in_transaction');
    // As with a broker, beginning is the client's own affair: a fenced producer (a paused zombie's) learns it
    // at its first call that reaches the cluster (send, sendOffsets, commit), and its transaction never opens there.
    this.txn = this.cluster.isCurrentEpoch(this.transactionalId, this.epoch) ? this.cluster.beginTxn(this.transactionalId) : null;
  }

  async send(records: OutgoingRecord[]): Promise<RecordPosition[]> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('send');
    this.fencedCheck();
    return this.cluster.append(records, this.txn);
  }

  async sendOffsets(groupId: string, offsets: PartitionOffset[]): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('sendOffsets');
    this.fencedCheck();
    for (const o of offsets) this.txn!.offsets.push({ groupId, ...o });
  }

  async commit(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('commit');
    this.machine.to('committing');
    this.fencedCheck();
    this.cluster.endTxn(this.txn!, 'committed');
    this.conn.commits++;
    this.txn = null;
    this.machine.to('ready');
  }

  async abort(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.guard('abort');
    this.machine.to('aborting');
    this.fencedCheck();
    if (this.txn?.state === 'open') this.cluster.endTxn(this.txn, 'aborted');
    this.txn = null;
    this.machine.to('ready');
  }

  async close(): Promise<void> {
    if (this.conn.dead) return this.conn.hang();
    this.machine.to('closed');
  }
}
