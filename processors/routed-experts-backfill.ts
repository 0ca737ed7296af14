/**
 * Routed-experts backfill (SPEC §5.1, REFERENCE-NOTES 34).
 *
 * Routes are only captured where generation ran, so within one group some
 * messages carry a `[tokens, layers, topk]` block and others (prompts, tool
 * output, a turn whose capture failed) do not. Concatenating per row would
 * then silently misalign routes with tokens, so every tokenized message
 * without routes gets the missing-route sentinel −1 over its tokens.
 *
 * The reference materialises a −1 tensor per message. We only *plan* the
 * backfill here (which geometry, how many messages per row) and the packer
 * writes −1 straight into the output buffer, so no sentinel block is ever
 * allocated and copied twice.
 */
import { PackError } from './pack-error.js';
import { matchesDType } from './typed-arrays.js';
import type { DType, Message, Tensor } from './types.js';

/** Value written for tokens no route capture covered. */
export const MISSING_ROUTE_SENTINEL = -1;

const ROUTE_DTYPES: ReadonlySet<DType> = new Set<DType>(['uint8', 'int8', 'int16', 'int32', 'int64']);

/** Bytes of the packed dtype that holds a block's ids and the −1 sentinel. */
const PACKED_WIDTH: Partial<Record<DType, number>> = { int8: 1, uint8: 2, int16: 2, int32: 4, int64: 4 };

const RANGE: Record<'int8' | 'int16' | 'int32', [number, number]> = { int8: [-128, 127], int16: [-32768, 32767], int32: [-(2 ** 31), 2 ** 31 - 1] };

/** Source dtypes whose every value fits each packed dtype (the others are checked id by id). */
const ALWAYS_FITS: Record<'int8' | 'int16' | 'int32', ReadonlySet<DType>> = {
  int8: new Set<DType>(['int8']),
  int16: new Set<DType>(['int8', 'uint8', 'int16']),
  int32: new Set<DType>(['int8', 'uint8', 'int16', 'int32']),
};

/**
 * Refuses a block whose ids do not fit `dtype` (a forced narrower
 * `pack.routed_experts_dtype`, or int64 ids packed as int32), instead of
 * letting the typed-array copy wrap them.
 */
export function checkRoutesFit(messageLogs: readonly (readonly Message[])[], dtype: 'int8' | 'int16' | 'int32'): void {
  const [lo, hi] = RANGE[dtype];
  messageLogs.forEach((log, row) => {
    for (const m of log) {
      const re = m.routed_experts;
      if (re == null || ALWAYS_FITS[dtype].has(re.dtype)) continue;
      for (let i = 0; i < re.data.length; i++) {
        const v = Number(re.data[i]!);
        if (v < lo || v > hi) {
          throw new PackError('pack_bad_routed_experts', `routed expert id ${v} does not fit the packed dtype ${dtype} (pack.routed_experts_dtype)`, row);
        }
      }
    }
  });
}



export interface RoutedExpertsBackfill {
  /** `layers` and `topk` of the template: the first route block found scanning rows, then messages, in order. */
  layers: number;
  topk: number;
  /** The producer's dtype as a packed dtype: the widest among the group's blocks (uint8 → int16, int64 → int32: room for the −1 sentinel). */
  dtype: 'int8' | 'int16' | 'int32';
  /** Per row: how many messages get the sentinel (`num_routed_experts_backfilled`). */
  backfilled: number[];
}

/** Whether the packer must write the sentinel for this message once a group has routes. */
export function needsSentinel(message: Message): boolean {
  return message.routed_experts == null && message.token_ids.length > 0;
}

/**
 * Plans the backfill of missing routes for one group's message logs.
 *
 * Returns null when no message of the group has routes (router replay off:
 * the field stays absent and nothing is counted). Otherwise returns the
 * template geometry and, per row, the number of messages with tokens but no
 * routes. Every existing block is checked against the template so the packer
 * can copy blind.
 *
 * @throws PackError `pack_bad_routed_experts` for a block whose rank is not 3,
 *   whose first dim differs from the message's token count, whose
 *   `[layers, topk]` differs from the template, whose dtype is not an integer
 *   type, or whose data does not match its shape and dtype.
 */
export function backfillMissingRoutedExperts(messageLogs: readonly (readonly Message[])[]): RoutedExpertsBackfill | null {
  let template: Tensor | null = null;
  for (const log of messageLogs) {
    for (const m of log) {
      if (m.routed_experts != null) {
        template = m.routed_experts;
        break;
      }
    }
    if (template !== null) break;
  }
  if (template === null) return null;
  if (template.shape.length !== 3) {
    throw new PackError('pack_bad_routed_experts', `routed_experts must be [tokens, layers, topk], got [${template.shape.join(', ')}]`);
  }
  const layers = template.shape[1]!;
  const topk = template.shape[2]!;

  let width = 0;
  const backfilled = messageLogs.map((log, row) => {
    let count = 0;
    for (const m of log) {
      const re = m.routed_experts;
      if (re == null) {
        if (m.token_ids.length > 0) count++;
        continue;
      }
      checkBlock(re, m.token_ids.length, layers, topk, row);
      width = Math.max(width, PACKED_WIDTH[re.dtype] ?? 0);
    }
    return count;
  });
  return { layers, topk, backfilled, dtype: width <= 1 ? 'int8' : width === 2 ? 'int16' : 'int32' };
}

function checkBlock(re: Tensor, tokens: number, layers: number, topk: number, row: number): void {
  const [t, l, k] = re.shape;
  if (re.shape.length !== 3 || t !== tokens || l !== layers || k !== topk) {
    throw new PackError(
      'pack_bad_routed_experts',
      `routed_experts block [${re.shape.join(', ')}] does not match [${tokens}, ${layers}, ${topk}] (tokens, template layers, topk)`,
      row,
    );
  }
  if (!ROUTE_DTYPES.has(re.dtype) || !matchesDType(re.data, re.dtype) || re.data.length !== tokens * layers * topk) {
    throw new PackError('pack_bad_routed_experts', `routed_experts data is not an integer ${re.dtype} array of ${tokens * layers * topk} elements`, row);
  }
}
