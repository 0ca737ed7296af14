/** `bench <pack|e2e|tx>`: benchmarks that print ratios against a baseline measured in the same run. */
import { UsageError, type Command } from './command.js';

export const benchCommand: Command = {
  name: 'bench',
  summary: 'benchmarks (pack, e2e, tx); each prints ratios against a baseline measured in the same run',
  usage: `usage: ./rollout-stream bench <pack|e2e|tx> [options]

  pack   packing throughput against a plain memcpy of the same bytes; last line
         "ratio pack/memcpy: <n>" (options: ./rollout-stream bench pack --help)
  e2e    the load generator through all stages on the local broker against the
         broker's raw throughput; last line "ratio e2e/raw: <n>"
  tx     one stage step's transaction (begin, send, sendOffsets, commit) against
         a plain acks=all send; the latency floor per stage; last line
         "ratio tx/plain: <n>"

Results and the commands that produced them: bench/README.md.
Example: ./rollout-stream bench pack --groups 4`,
  async run(argv) {
    const [which, ...rest] = argv;
    if (which === 'pack') return ((await import('../bench/pack.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'e2e') return ((await import('../bench/e2e.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'tx') return ((await import('../bench/transaction.js')) as { main(a: string[]): Promise<number> }).main(rest);
    throw new UsageError(`expected 'pack', 'e2e' or 'tx', got ${which ?? 'nothing'}`);
  },
};
