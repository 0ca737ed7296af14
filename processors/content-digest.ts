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
import { createHash, type Hash } from 'node:crypto';

export const CONTENT_DIGEST_PREFIX = 'c1:';

const NOT_CONTENT = new Set(['produced_at']);

function walk(h: Hash, v: unknown): void {
  if (v === null || v === undefined) {
    h.update('z');
    return;
  }
  switch (typeof v) {
    case 'string':
      h.update(`s${Buffer.byteLength(v)}:`);
      h.update(v);
      return;
    case 'number':
      h.update(`n${Object.is(v, -0) ? 0 : v};`);
      return;
    case 'bigint':
      h.update(`i${v};`);
      return;
    case 'boolean':
      h.update(v ? 'T' : 'F');
      return;
    case 'object':
      break;
    default:
      h.update(`?${String(v)};`);
      return;
  }
  if (ArrayBuffer.isView(v)) {
    const bytes = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    h.update(`t${v.constructor.name}${bytes.length}:`);
    h.update(bytes);
    return;
  }
  if (Array.isArray(v)) {
    h.update(`[${v.length}:`);
    for (const x of v) walk(h, x);
    h.update(']');
    return;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined && o[k] !== null)
    .sort();
  h.update(`{${keys.length}:`);
  for (const k of keys) {
    walk(h, k);
    walk(h, o[k]);
  }
  h.update('}');
}

/** The content digest of a decoded record (`c1:` + hex SHA-256), `produced_at` left out. */
export function contentDigest(record: unknown): string {
  const h = createHash('sha256');
  if (record !== null && typeof record === 'object' && !Array.isArray(record) && !ArrayBuffer.isView(record)) {
    const o = record as Record<string, unknown>;
    const content: Record<string, unknown> = {};
    for (const k of Object.keys(o)) if (!NOT_CONTENT.has(k)) content[k] = o[k];
    walk(h, content);
  } else walk(h, record);
  return CONTENT_DIGEST_PREFIX + h.digest('hex');
}
