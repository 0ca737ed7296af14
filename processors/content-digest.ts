/**
 * A record's content identity for replay detection: two copies of a row are
 * the same row when they say the same thing, whoever sent them and however
 * their JSON was spelled. The digest walks the decoded record: object keys
 * in sorted order (absent and null alike are left out), strings by their
 * characters (escaped or raw unicode is the same string once parsed), numbers
 * by value (`1.0` is `1`, `-0` is `0`), arrays in order, and tensors as their
 * dtype and raw bytes (a dtype is content: it decides the packed dtype).
 * `produced_at` at the top level is not content (a publisher that re-sends
 * after a crash stamps a new time). Versioned by its prefix, so identities
 * stored by an older rule (a hash of the encoded bytes) are still told apart.
 */
import { createHash } from 'node:crypto';
import { normalizedGymColumns } from './gym-columns.js';

export const CONTENT_DIGEST_PREFIX = 'c1:';

const NOT_CONTENT = new Set(['produced_at']);

/**
 * The canonical text is built as one string (V8 joins string pieces cheaply)
 * and hashed once, followed by the tensors' bytes in the order the text names
 * them (each with its byte length in the text, so the whole stays
 * unambiguous): one hash update per tensor, none per value.
 */
function canonical(v: unknown, tensors: Uint8Array[]): string {
  if (v === null || v === undefined) return 'z';
  switch (typeof v) {
    case 'string':
      // The length in UTF-16 units keeps strings apart (the string itself follows).
      return `s${v.length}:${v}`;
    case 'number':
      return `n${Object.is(v, -0) ? 0 : v};`;
    case 'bigint':
      return `i${v};`;
    case 'boolean':
      return v ? 'T' : 'F';
    case 'object':
      break;
    default:
      return `?${String(v)};`;
  }
  if (ArrayBuffer.isView(v)) {
    tensors.push(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
    return `t${v.constructor.name}${v.byteLength};`;
  }
  if (Array.isArray(v)) {
    let out = `[${v.length}:`;
    for (const x of v) out += canonical(x, tensors);
    return `${out}]`;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  keys.sort();
  let out = '{';
  for (const k of keys) {
    const x = o[k];
    if (x === undefined || x === null) continue;
    out += `s${k.length}:${k}${canonical(x, tensors)}`;
  }
  return `${out}}`;
}

function digestOf(v: unknown): string {
  const tensors: Uint8Array[] = [];
  const h = createHash('sha256').update(canonical(v, tensors));
  for (const t of tensors) h.update(t);
  return h.digest('hex');
}

/** The content digest of a decoded record (`c1:` + hex SHA-256), `produced_at` left out. */
export function contentDigest(record: unknown): string {
  if (record !== null && typeof record === 'object' && !Array.isArray(record) && !ArrayBuffer.isView(record)) {
    const o = record as Record<string, unknown>;
    const content: Record<string, unknown> = {};
    for (const k of Object.keys(o)) if (!NOT_CONTENT.has(k)) content[k] = o[k];
    return CONTENT_DIGEST_PREFIX + digestOf(content);
  }
  return CONTENT_DIGEST_PREFIX + digestOf(record);
}

/**
 * The content digest of a decoded GymResult (from Avro version 1 or 2, or a
 * JSON line): `contentDigest` of it after `normalizedGymColumns`, so the
 * same rollout has one digest whichever way its numbers travelled.
 */
export function gymResultDigest(record: unknown): string {
  if (record === null || typeof record !== 'object' || Array.isArray(record) || !('gym_result' in record)) return contentDigest(record);
  return contentDigest({ ...record, gym_result: normalizedGymColumns(record.gym_result) });
}
