/**
 * The transactional producer's state machine, explicit and guarded (after
 * kafkajs's `eosManager/transactionStateMachine.js` and the Java
 * `TransactionManager`), plus the error states kafkajs lacks: a sink whose
 * commit failed with an unknown outcome refuses every later call instead of
 * carrying on. Pure: every adapter's sink drives one.
 *
 *   uninitialized ─init─▶ initializing ─▶ ready ─begin─▶ in_transaction
 *   in_transaction ─commit─▶ committing ─▶ ready
 *   in_transaction | abortable_error ─abort─▶ aborting ─▶ ready
 *   a failed begin ─▶ fatal_error; a failed send/sendOffsets ─▶ abortable_error; a newer epoch ─▶ fenced;
 *   a commit/abort whose outcome is unknown ─▶ fatal_error; close ─▶ closed
 *
 * No re-init: a new owner of a transactional id is a new sink.
 */
import { RolloutStreamError } from '../../errors/index.js';

export type TxState =
  | 'uninitialized'
  | 'initializing'
  | 'ready'
  | 'in_transaction'
  | 'abortable_error'
  | 'committing'
  | 'aborting'
  | 'fenced'
  | 'fatal_error'
  | 'closed';

export const TX_STATES: readonly TxState[] = [
  'uninitialized',
  'initializing',
  'ready',
  'in_transaction',
  'abortable_error',
  'committing',
  'aborting',
  'fenced',
  'fatal_error',
  'closed',
];

/** Legal next states of each state. */
export const TX_TRANSITIONS: Readonly<Record<TxState, readonly TxState[]>> = {
  uninitialized: ['initializing', 'closed'],
  initializing: ['ready', 'fenced', 'fatal_error', 'closed'],
  // A begin the client refuses: fenced on a newer epoch, else fatal.
  ready: ['in_transaction', 'fenced', 'fatal_error', 'closed'],
  in_transaction: ['committing', 'aborting', 'abortable_error', 'fenced', 'closed'],
  abortable_error: ['aborting', 'fenced', 'closed'],
  committing: ['ready', 'fenced', 'fatal_error'],
  aborting: ['ready', 'fenced', 'fatal_error'],
  fenced: ['closed'],
  fatal_error: ['closed'],
  closed: [],
};

export type TxCall = 'init' | 'begin' | 'send' | 'sendOffsets' | 'commit' | 'abort' | 'close';

export const TX_CALLS: readonly TxCall[] = ['init', 'begin', 'send', 'sendOffsets', 'commit', 'abort', 'close'];

/** The states in which each call is legal. */
export const TX_GUARDS: Readonly<Record<TxCall, readonly TxState[]>> = {
  init: ['uninitialized'],
  begin: ['ready'],
  send: ['in_transaction'],
  sendOffsets: ['in_transaction'],
  commit: ['in_transaction'],
  abort: ['in_transaction', 'abortable_error'],
  close: TX_STATES,
};

/** A call made in a state that does not allow it: a bug in the runtime, never retried. */
export class TransactionStateError extends RolloutStreamError {
  constructor(
    readonly transactionalId: string,
    readonly call: TxCall,
    readonly state: TxState,
  ) {
    super('transaction_state', `transactional producer ${transactionalId}: ${call}() is not allowed in state ${state} (allowed in ${TX_GUARDS[call].join(', ')})`);
  }
}

export class TransactionStateMachine {
  private current: TxState = 'uninitialized';
  private readonly history: TxState[] = [];

  constructor(readonly transactionalId: string) {}

  get state(): TxState {
    return this.current;
  }

  /** Throws TransactionStateError unless `call` is legal now. */
  guard(call: TxCall): void {
    if (!TX_GUARDS[call].includes(this.current)) throw new TransactionStateError(this.transactionalId, call, this.current);
  }

  /** Moves to `next`; an illegal transition is a bug (TransactionStateError naming it). */
  to(next: TxState): void {
    if (this.current === next && next === 'closed') return;
    if (!TX_TRANSITIONS[this.current].includes(next)) {
      throw new RolloutStreamError('transaction_state', `transactional producer ${this.transactionalId}: no transition ${this.current} → ${next}`);
    }
    this.history.push(this.current);
    this.current = next;
  }

  /**
   * After a client call failed with `error` (already coded by the adapter):
   * `fenced` when a newer owner fenced this producer, else `otherwise`;
   * nothing once closed. Returns `error` for the caller to throw.
   */
  failed(error: unknown, otherwise: TxState): unknown {
    if (this.current !== 'closed') this.to(error instanceof RolloutStreamError && error.code === 'producer_fenced' ? 'fenced' : otherwise);
    return error;
  }

  /** The states passed through, oldest first (for error messages and tests). */
  trail(): TxState[] {
    return [...this.history, this.current];
  }
}
