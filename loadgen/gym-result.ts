/**
 * A generated row as the raw NeMo-Gym result a rollout worker would
 * publish instead (SPEC §2.1), for `loadgen --format gym-result`: the
 * ingest conversion in accumulate turns it back into the row's generated
 * turns, so the ingest path is loaded like the row path, faults included.
 *
 * The inverse of the conversion, item by item. For the k-th generated
 * assistant message of `message_log`, its turn's *carrier* output item
 * (the last item the model wrote in that turn: the function call, the
 * message, or the reasoning when nothing followed it; NeMo-Gym's model
 * server puts a turn's token ids on its last item) gets
 *
 *   prompt_token_ids     = every token of message_log before that message
 *                          (cumulative, so each turn's prompt begins with
 *                          the previous turns: contiguity holds), Int32Array
 *   generation_token_ids = the message's tokens, Int32Array
 *   generation_log_probs = its logprobs as Float64Array (NaN / ±Infinity
 *                          included: they travel as a binary column; the
 *                          JSON form prints them as "NaN" / "Infinity")
 *   routed_experts       = with routes, "nrlre1:<dtype>:<S>x<L>x<K>:<base64>"
 *                          over all S = prompt + generated tokens
 *
 * Every other item (function_call_output, a reasoning item followed by a
 * message, …) stays non-trainable. Routes of prompt positions, which rows
 * do not carry, are filled in once per row, so the envelope of turn k+1
 * repeats turn k's rows exactly and the conversion's "last route row of the
 * previous turn" rule reproduces the row's own value.
 *
 * What does not survive the round trip, by design of §2.1: message
 * `content` (the conversion writes ""), media (a GymResult carries none),
 * and the two violation flags, which the conversion derives from the item
 * texts (the synthetic texts contain no tool-call pattern or think tag).
 */
import type { GymResult, JsonObject, Message, RolloutRow, Tensor } from '../processors/types.js';
import type { GymLoadgenEvent, LoadgenEvent } from './events.js';

const ENVELOPE_DTYPES = new Set(['int8', 'int16', 'int32']);

/** A `[S, L, K]` int8/int16/int32 route tensor as the NeMo-RL codec's `nrlre1` envelope (little-endian, padded base64). */
export function routedExpertsEnvelope(t: Tensor): string {
  if (t.shape.length !== 3) throw new RangeError(`routed experts must be [tokens, layers, topk], got shape [${t.shape.join(', ')}]`);
  if (!ENVELOPE_DTYPES.has(t.dtype)) throw new RangeError(`the nrlre1 envelope holds int8, int16 or int32 routes, not ${t.dtype}`);
  // Typed arrays are little-endian on every platform Node runs on, as the envelope requires.
  const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  return `nrlre1:${t.dtype}:${t.shape.join('x')}:${bytes.toString('base64')}`;
}

const isGenerated = (m: Message): boolean => m.role === 'assistant' && m.generation_logprobs != null;

/** The turn an item of the row builder belongs to: `rs_3`, `fc_3`, `msg_3` → 3; anything else (tool outputs) → null. */
function turnOf(item: JsonObject): number | null {
  const m = typeof item.id === 'string' ? /^(?:rs|fc|msg)_(\d+)$/.exec(item.id) : null;
  return m ? Number(m[1]) : null;
}

/** Index in `output` of turn `k`'s carrier; inserts an empty message item at the turn's place when the turn wrote none. */
function carrierIndex(output: JsonObject[], k: number): number {
  let last = -1;
  let firstLater = output.length;
  for (let i = 0; i < output.length; i++) {
    const t = turnOf(output[i] as JsonObject);
    if (t === k) last = i;
    else if (t !== null && t > k && firstLater === output.length) firstLater = i;
  }
  if (last >= 0) return last;
  output.splice(firstLater, 0, { type: 'message', id: `msg_${k}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: '', annotations: [] }] });
  return firstLater;
}

/**
 * The full `[tokens, layers, topk]` route table of the conversation: each
 * message's own routes where it has them (generated turns), and for the
 * others (prompt positions) the route rows of the first routed message
 * repeated: valid expert ids of the right shape, no random draws, so the
 * table is a function of the row and costs two copies. Null when no message
 * has routes.
 */
function conversationRoutes(row: RolloutRow, total: number): Tensor | null {
  const first = row.message_log.find((m) => m.routed_experts != null && m.routed_experts.shape[0]! > 0)?.routed_experts;
  if (first == null) return null;
  const [srcTokens, layers, topk] = first.shape as [number, number, number];
  const dtype = first.dtype;
  if (!ENVELOPE_DTYPES.has(dtype)) throw new RangeError(`routed experts of dtype ${dtype} have no nrlre1 envelope; use int8, int16 or int32`);
  const per = layers * topk;
  // Same element type as the row's routes (the wire dtype of the envelope).
  const out = new (first.data.constructor as new (n: number) => Int8Array)(total * per);
  const src = first.data as Int8Array;
  let at = 0;
  for (const m of row.message_log) {
    const n = m.token_ids.length;
    const own = m.routed_experts;
    if (own != null && own.shape[0] === n && own.shape[1] === layers && own.shape[2] === topk) {
      out.set(own.data as Int8Array, at * per);
    } else {
      for (let done = 0; done < n; done += srcTokens) out.set(src.subarray(0, Math.min(srcTokens, n - done) * per), (at + done) * per);
    }
    at += n;
  }
  return { dtype, shape: [total, layers, topk], data: out };
}

/**
 * The GymResult whose §2.1 conversion gives `row`'s message tokens,
 * logprobs and routes back (see the file comment for what it does not
 * keep). `gym_row` is the task row as sent (`responses_create_params` =
 * the row's request, `agent_ref`, `_ng_task_index` when the row has a task
 * index); `gym_result` is the row's `full_result` with the token fields on
 * the carrier items and an echo of `responses_create_params`. Pure; the
 * row is not modified.
 */
export function gymResultFromRow(row: RolloutRow): GymResult {
  const total = row.message_log.reduce((n, m) => n + m.token_ids.length, 0);
  const tokens = new Int32Array(total);
  const routes = conversationRoutes(row, total);
  const per = routes === null ? 0 : (routes.shape[1] as number) * (routes.shape[2] as number);
  const gymResult = structuredClone(row.full_result);
  const response = (gymResult.response ??= {}) as JsonObject;
  const output = (Array.isArray(response.output) ? response.output : (response.output = [])) as JsonObject[];
  let at = 0;
  let k = 0;
  for (const m of row.message_log) {
    tokens.set(m.token_ids, at);
    if (isGenerated(m)) {
      const item = output[carrierIndex(output, k)] as JsonObject;
      const end = at + m.token_ids.length;
      // Typed arrays, as a worker holding tensors would pass them: they travel as binary columns (JsonObject does not type them).
      const typed = item as Record<string, unknown>;
      typed.prompt_token_ids = tokens.slice(0, at);
      typed.generation_token_ids = Int32Array.from(m.token_ids);
      typed.generation_log_probs = Float64Array.from(m.generation_logprobs as Float32Array);
      if (routes !== null) {
        const shape = [end, routes.shape[1] as number, routes.shape[2] as number];
        item.routed_experts = routedExpertsEnvelope({ dtype: routes.dtype, shape, data: routes.data.subarray(0, end * per) });
      }
      k++;
    }
    at += m.token_ids.length;
  }
  gymResult.responses_create_params = structuredClone(row.request);
  const gymRow: JsonObject = { responses_create_params: structuredClone(row.request), agent_ref: structuredClone(row.agent_ref) };
  // Only when set: the conversion falls back to it for a result without task_index, which would undo a task-mismatch fault.
  if (row.task_index != null) gymRow._ng_task_index = row.task_index;
  const result: GymResult = {
    batch_id: row.batch_id,
    group_id: row.group_id,
    group_index: row.group_index,
    row_index: row.row_index,
    num_generations: row.num_generations,
    prompt_idx: row.prompt_idx,
    task_index: row.task_index ?? null,
    weight_version: row.weight_version,
    instance_label: row.instance_label ?? null,
    gym_row: gymRow,
    gym_result: gymResult,
    timing: row.timing ? { ...row.timing } : null,
    produced_at: row.produced_at ?? null,
  };
  return result;
}

/**
 * The events of a run with every row replaced by its GymResult
 * (`gymResultFromRow`), same order, delays and expected outcomes; garbage
 * and batch ends pass through. Lazy, like the events it maps.
 */
export function* asGymResultEvents(events: Iterable<LoadgenEvent>): Generator<GymLoadgenEvent> {
  for (const e of events) {
    if (e.kind !== 'row') {
      yield e;
      continue;
    }
    const result = gymResultFromRow(e.row);
    yield e.expect === undefined ? { kind: 'gym_result', delayMs: e.delayMs, result } : { kind: 'gym_result', delayMs: e.delayMs, result, expect: e.expect };
  }
}
