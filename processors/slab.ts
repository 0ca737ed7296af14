/**
 * One allocation per packed group, and where the packer writes it.
 *
 * Packing is memory-bound, and on Linux the dominant cost of a fresh output
 * buffer is not the copy but the page faults that zero it on first touch
 * (measured: ~1 µs per 4 KiB page, i.e. slower than the copy itself, and the
 * C allocator hands out fresh pages for anything above 32 MiB). So every
 * large column of a group is carved out of one slab, sized exactly after a
 * planning pass, and a caller that packs many groups can recycle slabs
 * through a `SlabPool` instead of faulting in new memory each time.
 *
 * Views are 8-byte aligned; a PackedField's `values` is then a view with a
 * non-zero `byteOffset` into the shared slab: encoders must use
 * `byteOffset`/`byteLength`, never the whole `.buffer`.
 *
 * More generally the packer writes into a `PackTarget`: it plans the whole
 * packed group first (a `PackedLayout`: ids, tags, and every field without
 * its values) and asks the target for one view per field. A slab is one
 * target (`slabTarget`); an encoder can be another, handing out views into
 * the very buffer it will send, so that packing is building the value and
 * nothing is copied afterwards (streams/codecs/framed-pack-target.ts).
 */
import { widenableBuffer } from './int64-widen.js';
import { TYPED_ARRAY_CLASSES } from './typed-arrays.js';
import type { DType, PackedField, PackedGroup, TypedArray } from './types.js';

/** A packed field before its values exist: everything but `values`, and how many elements of `dtype` they will be. */
export interface PlannedField extends Omit<PackedField, 'dtype' | 'values'> {
  dtype: DType;
  length: number;
}

/** A packed group planned and not yet written: ids and tags final, fields without values, in the group's field order. */
export interface PackedLayout extends Omit<PackedGroup, 'fields'> {
  fields: PlannedField[];
}

/**
 * Where the packer writes one group. `place` is called once per group, with
 * the whole layout, before any value is written; it returns one view per
 * field, in the layout's order, each `length` elements of the field's dtype
 * (a `TYPED_ARRAY_CLASSES[dtype]` instance). The packer then writes every
 * element of every view (zeros included), so the memory behind them needs no
 * clearing, and it reads nothing else of it. Views must not overlap.
 */
export interface PackTarget {
  place(layout: PackedLayout): TypedArray[];
}

/** What `packGroup` accepts as output memory: a slab source (one slab per group) or a target. */
export type PackMemory = SlabSource | PackTarget;

/** Every field of the group carved, in order, out of one slab from `source`. */
export function slabTarget(source: SlabSource): PackTarget {
  return {
    place(layout) {
      const plan = new SlabPlan();
      for (const f of layout.fields) plan.add(f.dtype, f.length);
      return plan.carve(source);
    },
  };
}

/** `memory` as a target (a slab source becomes `slabTarget(memory)`). */
export function packTarget(memory: PackMemory): PackTarget {
  return typeof memory === 'function' ? slabTarget(memory) : memory;
}


/** Where slabs come from: fresh zeroed memory by default, or a pool. Contents of a returned buffer are unspecified. */
export type SlabSource = (bytes: number) => ArrayBuffer;

export const freshSlab: SlabSource = (bytes) => new ArrayBuffer(bytes);

/** Collects the columns of one group, then carves them out of a single buffer in the same order. */
export class SlabPlan {
  private readonly parts: { dtype: DType; length: number; at: number }[] = [];
  private bytes = 0;

  /** Reserves `length` elements of `dtype`; returns the index of the view in `carve()`'s result. */
  add(dtype: DType, length: number): number {
    this.bytes = Math.ceil(this.bytes / 8) * 8;
    this.parts.push({ dtype, length, at: this.bytes });
    this.bytes += length * TYPED_ARRAY_CLASSES[dtype].BYTES_PER_ELEMENT;
    return this.parts.length - 1;
  }

  get byteLength(): number {
    return this.bytes;
  }

  /** The views, in `add` order, over a buffer of at least `byteLength` bytes taken from `source`. Contents are not cleared. */
  carve(source: SlabSource): TypedArray[] {
    const buffer = source(this.bytes);
    if (buffer.byteLength < this.bytes) throw new Error(`slab of ${buffer.byteLength} bytes, need ${this.bytes}`);
    return this.parts.map((p) => new TYPED_ARRAY_CLASSES[p.dtype](buffer, p.at, p.length));
  }
}

const SLACK = 65536;

/**
 * Recycles buffers between groups (slabs, or whole framed values). Single-
 * threaded and caller-owned: give a buffer back (`give`, or `release(packed)`
 * for a packed group's slab) only once nothing reads or holds it any more —
 * after it was encoded, or, for a value handed to a Kafka producer, after the
 * send was acknowledged — or the next group overwrites it.
 *
 * Bounded in what it keeps idle (`maxRetainedBytes` of free buffers, the
 * most recently given back); any one buffer up to that bound is recycled,
 * whatever its size. Buffers it handed out and never got back are the GC's:
 * the pool keeps no reference to them.
 */
export class SlabPool {
  private free: ArrayBuffer[] = [];
  private retained = 0;
  private readonly issued = new WeakSet<ArrayBuffer>();
  private readonly lent = new WeakMap<ArrayBuffer, ArrayBufferView>();
  private lentNow = 0;

  /** @param maxRetainedBytes free slabs kept for reuse, beyond which released slabs are left to the GC. */
  constructor(private readonly maxRetainedBytes = 1024 * 1024 * 1024) {}

  /** A free slab of at least `bytes` and at most 1.5× that plus 64 KiB (so small groups do not pin big slabs), else a new one. */
  readonly source: SlabSource = (bytes) => {
    let best = -1;
    this.free.forEach((b, i) => {
      if (b.byteLength >= bytes && b.byteLength <= bytes * 1.5 + SLACK && (best < 0 || b.byteLength < this.free[best]!.byteLength)) best = i;
    });
    let buffer: ArrayBuffer;
    if (best >= 0) {
      buffer = this.free.splice(best, 1)[0]!;
      this.retained -= buffer.byteLength;
    } else {
      // Rounded up so that slightly larger groups later can reuse it.
      // A widenable buffer, so the packer widens token ids straight into it (int64-widen.ts).
      buffer = widenableBuffer(Math.ceil((bytes * 1.125) / SLACK) * SLACK);
      this.issued.add(buffer);
    }
    return buffer;
  };

  /** Same as `source`. */
  take(bytes: number): ArrayBuffer {
    return this.source(bytes);
  }

  /**
   * Takes back a buffer this pool issued (others are ignored, as are a buffer
   * already free and one lent and not settled); kept for reuse, the oldest
   * free buffers dropped to the GC when it would exceed the bound. A buffer
   * larger than the bound itself is left to the GC.
   * @returns whether it was kept.
   */
  give(buffer: ArrayBuffer): boolean {
    if (!this.issued.has(buffer) || this.lent.has(buffer) || this.free.includes(buffer)) return false;
    if (buffer.byteLength > this.maxRetainedBytes) return false;
    // The oldest free buffers make room: the workload's recent sizes are the likely next ones.
    while (this.retained + buffer.byteLength > this.maxRetainedBytes) this.retained -= this.free.shift()!.byteLength;
    this.free.push(buffer);
    this.retained += buffer.byteLength;
    return true;
  }

  /**
   * Marks the buffer behind `view` (one this pool issued) as held elsewhere —
   * a framed value handed to a Kafka producer — until `settle(view)`: until
   * then `give` ignores it and it is never handed out again.
   */
  lend(view: ArrayBufferView): void {
    const b = view.buffer as ArrayBuffer;
    if (!this.issued.has(b) || this.lent.has(b)) return;
    this.lent.set(b, view);
    this.lentNow++;
  }

  /**
   * Gives back the buffer lent with exactly this `view`: call it once the
   * holder let go (the producer acknowledged the send: the transaction that
   * wrote it committed or aborted). Any other view — released twice, or
   * stale because its buffer was already reused for a later value — is
   * ignored, so a late or repeated call cannot free a buffer in use.
   * @returns whether the buffer came back (kept for reuse, or left to the GC beyond the bound).
   */
  settle(view: ArrayBufferView): boolean {
    const b = view.buffer as ArrayBuffer;
    if (this.lent.get(b) !== view) return false;
    this.lent.delete(b);
    this.lentNow--;
    this.give(b);
    return true;
  }

  /** Buffers lent and not settled yet (those never settled stay counted: the GC frees them, the pool cannot know). */
  get lentCount(): number {
    return this.lentNow;
  }

  /** Takes back the slab(s) this pool issued for `packed`; fields from elsewhere are ignored. */
  release(packed: PackedGroup): void {
    const seen = new Set<ArrayBuffer>();
    for (const f of packed.fields) {
      const b = f.values.buffer as ArrayBuffer;
      if (seen.has(b)) continue;
      seen.add(b);
      this.give(b);
    }
  }

  /** The bound on `retainedBytes`. */
  get maxBytes(): number {
    return this.maxRetainedBytes;
  }

  /** Bytes currently held for reuse. */
  get retainedBytes(): number {
    return this.retained;
  }
}
