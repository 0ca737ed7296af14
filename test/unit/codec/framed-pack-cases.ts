/**
 * Synthetic groups for the one-copy packed value tests: text, routed experts
 * (every routes dtype), media (uniform and dynamic shapes), violation fields,
 * groups without `mask_sample`, empty rows, a token id above int32's uint8
 * range and a pad value outside int32 — each packed with a given config and
 * wire. The golden hashes in framed-pack.test.ts were taken from the copy
 * encoder (`encodeFramed` of `packGroup` into fresh memory) before the packer
 * learnt to write into the framed value.
 */
import { synthesizeGroup, type SynthOptions } from '../../../bench/synthetic-groups.js';
import type { PackConfig } from '../../../config/schema.js';
import type { PenalizedGroup } from '../../../processors/types.js';
import type { PackedWire } from '../../../streams/codecs/packed-mapping.js';
import { cfg } from '../pack/builders.js';

export interface FramedCase {
  name: string;
  group: PenalizedGroup;
  config: PackConfig;
  wire: PackedWire;
}

const small = (o: Partial<SynthOptions>): SynthOptions => ({ rows: 4, minTokens: 40, maxTokens: 700, routes: null, ...o });

function withoutMaskSample(g: PenalizedGroup): PenalizedGroup {
  return { ...g, rows: g.rows.map((r) => ({ ...r, mask_sample: null })) };
}

/** Small token ids only (0..255): narrow wire sends them as uint8. */
function smallIds(g: PenalizedGroup): PenalizedGroup {
  const cut = (ids: Int32Array) => ids.map((v) => v & 0xff);
  return {
    ...g,
    prompt: g.prompt.map((m) => ({ ...m, token_ids: cut(m.token_ids) })),
    rows: g.rows.map((r) => ({ ...r, message_log: r.message_log.map((m) => ({ ...m, token_ids: cut(m.token_ids) })) })),
  };
}

/** A group with an empty row and a row of one empty message. */
function withEmptyRows(g: PenalizedGroup): PenalizedGroup {
  const rows = [...g.rows];
  rows[1] = { ...rows[1]!, message_log: [] };
  rows[2] = { ...rows[2]!, message_log: [{ role: 'user', token_ids: new Int32Array(0) }] };
  return { ...g, rows };
}

export function framedCases(): FramedCase[] {
  const cases: FramedCase[] = [];
  const add = (name: string, group: PenalizedGroup, overrides: Record<string, unknown> = {}) => {
    for (const wire of ['trainer', 'narrow'] as const) cases.push({ name: `${name} (${wire})`, group, config: cfg(overrides), wire });
  };
  for (let seed = 1; seed <= 3; seed++) add(`text seed ${seed}`, synthesizeGroup(seed, 0, small({})));
  add('text, one row', synthesizeGroup(4, 0, small({ rows: 1 })));
  add('text without mask_sample', withoutMaskSample(synthesizeGroup(5, 1, small({}))));
  add('text with violation fields', synthesizeGroup(6, 2, small({})), { include_message_violation_fields: true });
  add('text with small ids and a wide pad', smallIds(synthesizeGroup(7, 0, small({}))), { pad_values: { token_ids: 2 ** 40 } });
  add('text with empty rows', withEmptyRows(synthesizeGroup(8, 0, small({ rows: 5 }))), { include_message_violation_fields: true });
  for (const dtype of ['int8', 'int16', 'int32'] as const) {
    add(`routed ${dtype}`, synthesizeGroup(9, 0, small({ routes: [3, 2] })), { routed_experts_dtype: dtype });
  }
  add('routed with violation fields', synthesizeGroup(10, 1, small({ rows: 6, routes: [4, 8] })), { include_message_violation_fields: true });
  add('media', synthesizeGroup(11, 0, small({ media: true })));
  add('media, routed and violation fields', synthesizeGroup(12, 3, small({ media: true, routes: [2, 2] })), { include_message_violation_fields: true });
  add('media with the tfjs backend', synthesizeGroup(13, 0, small({ media: true, routes: [2, 2] })), { backend: 'tfjs', include_message_violation_fields: true });
  return cases;
}
