/** Shared fixtures of the row-shape tests: compact default-profile rows and readers of their JSON. */
import { generateEvents, type LoadgenOptions, type ShapeOverrides } from '../../../loadgen/index.js';
import type { JsonObject, Message, RolloutRow } from '../../../processors/types.js';

/** Short default-profile rows: every feature of the profile, a fraction of the tokens. */
export const COMPACT: ShapeOverrides = {
  promptTokens: { median: 30, max: 200 },
  userTurnTokens: { median: 20, max: 100 },
  generatedTokens: { median: 60, max: 400 },
  textCharsPerToken: 1,
};

/** The rows of a small default-profile run (3 batches × 8 groups × 4), with `opts.shape` on top of COMPACT. */
export function rows(opts: Partial<LoadgenOptions> & { shape?: ShapeOverrides } = {}): RolloutRow[] {
  const events = generateEvents({
    batches: 3,
    groupsPerBatch: 8,
    generations: 4,
    seed: 5,
    profile: 'default',
    ...opts,
    shape: { ...COMPACT, ...opts.shape },
  });
  return [...events].flatMap((e) => (e.kind === 'row' ? [e.row] : []));
}

export const isGenerated = (m: Message): boolean => m.role === 'assistant' && m.generation_logprobs != null;

export const count = (ids: Int32Array, id: number): number => ids.reduce((n, x) => n + (x === id ? 1 : 0), 0);

export const output = (row: RolloutRow): JsonObject[] => (row.full_result.response as JsonObject).output as JsonObject[];

export const reason = (row: RolloutRow): string | null =>
  (((row.full_result.response as JsonObject).incomplete_details as JsonObject | null)?.reason as string | undefined) ?? null;

/** The text of a message item: `content[0].text` or string content. */
export const itemText = (item: JsonObject): string | null => {
  const c = item.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c) && c.length > 0) return ((c[0] as JsonObject).text as string) ?? null;
  return null;
};
