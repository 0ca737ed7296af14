/** `bench <pack|e2e|tx|ingest>`: benchmarks that print ratios against a baseline measured in the same run. */
import { UsageError, type Command } from '../tools/command.js';

export const benchCommand: Command = {
  name: 'bench',
  summary: 'benchmarks (pack, e2e, tx, ingest); each prints ratios against a baseline measured in the same run',
  usage: `usage: ./rollout-stream bench <pack|e2e|tx|ingest> [options]

  pack   packing throughput against a plain memcpy of the same bytes; last line
         "ratio pack/memcpy: <n>" (options: ./rollout-stream bench pack --help)
  e2e    the load generator through all stages on the local broker against the
         broker's raw throughput; last line "ratio e2e/raw: <n>"; --format gym-result
         sends NeMo-Gym results instead of rows (the ingest path)
  tx     one stage step's transaction (begin, send, sendOffsets, commit) against
         a plain acks=all send; the latency floor per stage; last line
         "ratio tx/plain: <n>"
  ingest GymResult ingest against JSON.parse of the same records ("ratio
         ingest/parse: <n>") and RolloutPublisher against a raw produce of the
         same bytes ("ratio publish/raw: <n>"), per profile; options
         [--profile published-max|router-replay] [--rows N] [--repeat R]
         [--seed S] [--no-publish]

Results and the commands that produced them: bench/README.md.
Example: ./rollout-stream bench pack --groups 4
         ./rollout-stream bench ingest --profile published-max`,
  delegatesHelp: true,
  async run(argv) {
    const [which, ...rest] = argv;
    if (which === 'pack') return ((await import('../bench/pack.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'e2e') return ((await import('../bench/e2e.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'tx') return ((await import('../bench/transaction.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'ingest') return ((await import('../bench/ingest.js')) as { main(a: string[]): Promise<number> }).main(rest);
    throw new UsageError(`expected 'pack', 'e2e', 'tx' or 'ingest', got ${which ?? 'nothing'}`);
  },
};
