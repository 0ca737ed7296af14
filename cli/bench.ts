/** `bench <pack|e2e>`: benchmarks that print ratios against a baseline measured in the same run. */
import { UsageError, type Command } from './command.js';

export const benchCommand: Command = {
  name: 'bench',
  summary: 'benchmarks (pack, e2e); each prints ratios against a baseline measured in the same run',
  usage: `usage: ./rollout-stream bench <pack|e2e> [options]

  pack   packing throughput against a plain memcpy of the same bytes; last line
         "ratio pack/memcpy: <n>" (options: ./rollout-stream bench pack --help)
  e2e    the load generator through all stages on the local broker against the
         broker's raw throughput; last line "ratio e2e/raw: <n>"

Results and the commands that produced them: bench/README.md.
Example: ./rollout-stream bench pack --groups 4`,
  async run(argv) {
    const [which, ...rest] = argv;
    if (which === 'pack') return ((await import('../bench/pack.js')) as { main(a: string[]): Promise<number> }).main(rest);
    if (which === 'e2e') return ((await import('../bench/e2e.js')) as { main(a: string[]): Promise<number> }).main(rest);
    throw new UsageError(`expected 'pack' or 'e2e', got ${which ?? 'nothing'}`);
  },
};
