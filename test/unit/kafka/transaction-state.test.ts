/** The transactional sink's state machine: every (state, call) guard and every (state, next) transition. */
import { describe, expect, test } from 'vitest';
import { RolloutStreamError } from '../../../errors/index.js';
import { TransactionStateError, TransactionStateMachine, TX_CALLS, TX_GUARDS, TX_STATES, TX_TRANSITIONS, type TxState } from '../../../streams/kafka/transaction-state.js';

/** A legal path from `uninitialized` to each state. */
const PATHS: Record<TxState, TxState[]> = {
  uninitialized: [],
  initializing: ['initializing'],
  ready: ['initializing', 'ready'],
  in_transaction: ['initializing', 'ready', 'in_transaction'],
  abortable_error: ['initializing', 'ready', 'in_transaction', 'abortable_error'],
  committing: ['initializing', 'ready', 'in_transaction', 'committing'],
  aborting: ['initializing', 'ready', 'in_transaction', 'aborting'],
  fenced: ['initializing', 'fenced'],
  fatal_error: ['initializing', 'ready', 'in_transaction', 'committing', 'fatal_error'],
  closed: ['closed'],
};

function machineIn(state: TxState): TransactionStateMachine {
  const m = new TransactionStateMachine('tx-test');
  for (const s of PATHS[state]) m.to(s);
  expect(m.state).toBe(state);
  return m;
}

describe('transaction state machine', () => {
  test.each(TX_STATES.flatMap((s) => TX_CALLS.map((c) => [s, c] as const)))('in %s, %s() is allowed only where the guard table says', (state, call) => {
    const m = machineIn(state);
    const allowed = TX_GUARDS[call].includes(state);
    if (allowed) expect(() => m.guard(call)).not.toThrow();
    else {
      const e = (() => {
        try {
          m.guard(call);
        } catch (err) {
          return err;
        }
        return null;
      })();
      expect(e).toBeInstanceOf(TransactionStateError);
      expect((e as TransactionStateError).code).toBe('transaction_state');
      expect((e as Error).message).toContain(`${call}() is not allowed in state ${state}`);
    }
    expect(m.state, 'a guard never changes the state').toBe(state);
  });

  test.each(TX_STATES.flatMap((from) => TX_STATES.map((to) => [from, to] as const)))('%s → %s only where the transition table says', (from, to) => {
    const m = machineIn(from);
    const legal = TX_TRANSITIONS[from].includes(to) || (from === 'closed' && to === 'closed');
    if (legal) {
      m.to(to);
      expect(m.state).toBe(to);
    } else {
      expect(() => m.to(to)).toThrow(/no transition/);
      expect(m.state).toBe(from);
    }
  });

  test('fenced and fatal_error lead only to closed; there is no way back to ready', () => {
    for (const s of ['fenced', 'fatal_error'] as const) expect(TX_TRANSITIONS[s]).toEqual(['closed']);
    expect(TX_GUARDS.init).toEqual(['uninitialized']);
  });

  test('a begin the client refuses leaves ready for fenced or fatal_error and surfaces its own error', () => {
    const fencedError = new RolloutStreamError('producer_fenced', 'a newer epoch');
    const fenced = machineIn('ready');
    expect(fenced.failed(fencedError, 'fatal_error')).toBe(fencedError);
    expect(fenced.state).toBe('fenced');
    const broken = machineIn('ready');
    const e = new Error('begin refused');
    expect(broken.failed(e, 'fatal_error')).toBe(e);
    expect(broken.state).toBe('fatal_error');
  });

  test('the trail records every state passed through', () => {
    expect(machineIn('committing').trail()).toEqual(['uninitialized', 'initializing', 'ready', 'in_transaction', 'committing']);
  });
});
