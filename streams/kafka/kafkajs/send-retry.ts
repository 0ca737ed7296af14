/**
 * A correctness patch of kafkajs 2.2.4's produce path (issue 14): a send's
 * retry waits until every request of the failed attempt has settled.
 *
 * kafkajs's `sendMessages` sends one request per partition leader and awaits
 * them with `Promise.all`, which rejects at the first failure while the other
 * requests are still in flight. The retry then starts at once (5 ms later
 * with our retry settings) and sends again to every broker that has not
 * answered yet, the ones still in flight included. kafkajs serialises the two
 * requests to one broker, so the second one takes sequence numbers after the
 * first one's: the broker cannot tell it is a copy and writes the records
 * again, and the second answer replaces the first, so the send resolves with
 * one answer per partition and nothing looks wrong. Seen on the three-broker
 * cluster (test/cluster/broker-loss.test.ts, stage restarted while a broker
 * is down): AddPartitionsToTxn for one leader answered CONCURRENT_TRANSACTIONS
 * while the request to another leader was on its way; that leader then took
 * the same 4 records twice (sequences 10-13 and 14-17) into one committed
 * transaction. Awaiting every request first keeps the answers of those that
 * succeeded (they are not sent again) and rolls back the sequences of those
 * that failed (their resend reuses them, so the broker drops a copy).
 *
 * kafkajs keeps the function in a closure, so the module itself is replaced:
 * its source, with that one statement changed, is compiled and put into the
 * CommonJS cache under its path before kafkajs's producer loads it (like the
 * CRC in ./speedups.ts, which imports this module first). The source is
 * fingerprinted: another kafkajs release leaves it unpatched, and the unit
 * test of this patch fails. Not a speed-up, so ROLLOUT_STREAM_KAFKAJS_PATCHES=0
 * leaves it installed.
 *
 * Without the fix a producer can write records twice, so its absence is an
 * error, never a silent gap: every module of this adapter that loads kafkajs
 * imports ./speedups.js (which imports this one) first, so any entry point
 * that builds a client through the adapter has it in force;
 * `createKafka` (client.ts), the adapter's one client factory, refuses to
 * build a client without it (`requireKafkaSendRetry`); and when the install
 * failed (kafkajs loaded before this module by some other path, or another
 * kafkajs release), kafkajs's own `Kafka.prototype.producer` is made to
 * refuse as well, so a client built directly with `new Kafka(...)` cannot
 * produce either. Each refusal is a `client_unpatched` error.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import { runInThisContext } from 'node:vm';
import { RolloutStreamError } from '../../../errors/index.js';

const require = createRequire(import.meta.url);

/** SHA-256 of kafkajs 2.2.4's src/producer/sendMessages.js, the module replaced here. */
export const SEND_MESSAGES_FINGERPRINT = '8a120e6993955e040a13014cccebd79b8d41e7355d6eda1065fa83fea2fbbcdb';

const AWAIT_FIRST_FAILURE = '        await Promise.all(requests)\n';
const AWAIT_ALL_SETTLED = [
  '        const settled = await Promise.allSettled(requests)',
  "        const failed = settled.find(s => s.status === 'rejected')",
  '        if (failed) throw failed.reason',
  '',
].join('\n');

/** kafkajs's sendMessages factory (see its source for the options). */
export type SendMessagesFactory = (options: object) => (send: object) => Promise<unknown[]>;

const sendMessagesPath = require.resolve('kafkajs/src/producer/sendMessages.js');

/**
 * Compiles kafkajs's sendMessages module as a CommonJS module at its own path,
 * `settled`: with the retry awaiting every request (else as published).
 * Returns null when its source is not the one this patch was written against.
 */
export function compileSendMessages(settled: boolean): { module: Module; factory: SendMessagesFactory } | null {
  const source = readFileSync(sendMessagesPath, 'utf8');
  if (createHash('sha256').update(source).digest('hex') !== SEND_MESSAGES_FINGERPRINT) return null;
  const body = settled ? source.replace(AWAIT_FIRST_FAILURE, AWAIT_ALL_SETTLED) : source;
  const wrapper = runInThisContext(`(function (exports, require, module, __filename, __dirname) {${body}\n})`, { filename: sendMessagesPath }) as (
    exports: object,
    require: NodeJS.Require,
    module: Module,
    filename: string,
    dirname: string,
  ) => void;
  const mod = new Module(sendMessagesPath);
  mod.filename = sendMessagesPath;
  wrapper.call(mod.exports, mod.exports, createRequire(sendMessagesPath), mod, sendMessagesPath, dirname(sendMessagesPath));
  mod.loaded = true;
  return { module: mod, factory: mod.exports as SendMessagesFactory };
}

/** Installs the fix; says why it could not be (null: installed). */
function install(): string | null {
  // kafkajs's producer captured the published module already: too late.
  if (require.cache[sendMessagesPath]) {
    return (
      'kafkajs was loaded before streams/kafka/kafkajs/send-retry.ts could install its send-retry fix (issue 14), so its producers may write a record twice; ' +
      'build clients only through streams/kafka/kafkajs/ (whose modules load the fix before kafkajs), or import streams/kafka/kafkajs/speedups.js before anything that loads kafkajs'
    );
  }
  const compiled = compileSendMessages(true);
  if (!compiled) {
    return (
      `kafkajs's src/producer/sendMessages.js is not the one the send-retry fix (issue 14) was written for (kafkajs 2.2.4, sha256 ${SEND_MESSAGES_FINGERPRINT.slice(0, 12)}…); ` +
      'its producers may write a record twice: port streams/kafka/kafkajs/send-retry.ts to this kafkajs release'
    );
  }
  require.cache[sendMessagesPath] = compiled.module;
  return null;
}

/** Why kafkajs's sends in this process lack the fix (null: they have it). */
export const kafkaSendRetryProblem = install();

/** Whether kafkajs's sends in this process retry only after every request of an attempt settled. */
export const kafkaSendRetryPatched = kafkaSendRetryProblem === null;

/** Throws `client_unpatched` unless the fix is in force: every kafkajs client is built after this check (client.ts). */
export function requireKafkaSendRetry(): void {
  if (kafkaSendRetryProblem !== null) throw new RolloutStreamError('client_unpatched', kafkaSendRetryProblem);
}

// A client built around the factory (`new Kafka(...)`) refuses to produce without the fix, instead of producing with the gap.
if (kafkaSendRetryProblem !== null) {
  const { Kafka } = require('kafkajs') as { Kafka: { prototype: { producer: (...args: unknown[]) => unknown } } };
  Kafka.prototype.producer = function refuseUnpatchedProducer(): never {
    throw new RolloutStreamError('client_unpatched', kafkaSendRetryProblem);
  };
}
